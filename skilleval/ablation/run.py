"""Graph entry point of one ablation run: build it, then audit it."""

from __future__ import annotations

from typing import Any

from skilleval.ablation.audit import write_audit
from skilleval.ablation.plan import PlannedRun
from skilleval.ablation.trainer import build_run


def build_and_audit(
    run: PlannedRun, matrix: dict[str, Any], summary_path: str, audit_path: str
) -> None:
    build_run(run, matrix, summary_path)
    write_audit(run, matrix, summary_path, audit_path)
