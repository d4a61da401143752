"""Graph entry point of one ablation run: build it, then audit it.

Given its evidence identity (config.rule_inputs.AblationInputs.ablation_identity) and where
complete runs are kept, a run whose identity equals that of a kept complete run restores
that run's summary and audit byte for byte and launches no trainer.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from skilleval.ablation.audit import write_audit
from skilleval.ablation.plan import PlannedRun
from skilleval.ablation.trainer import build_run
from skilleval.storage.kept import KeptOutputs

log = logging.getLogger(__name__)


def build_and_audit(
    run: PlannedRun,
    matrix: dict[str, Any],
    summary_path: str,
    audit_path: str,
    identity: str | None = None,
    kept_root: str | None = None,
) -> None:
    outputs = {"summary.json": summary_path, "audit.json": audit_path}
    kept = (
        KeptOutputs(Path(kept_root) / run.run_id / f"{identity}.complete")
        if identity and kept_root
        else None
    )
    if kept is not None and kept.restore(outputs):
        log.info(
            "ablation run %s: evidence unchanged (identity %s): its complete result is "
            "restored from %s; no trainer launched",
            run.run_id,
            identity,
            kept.folder,
        )
        return
    log.info("ablation run %s: training with the %s trainer", run.run_id, matrix["trainer"]["kind"])
    build_run(run, matrix, summary_path)
    write_audit(run, matrix, summary_path, audit_path)
    if kept is not None:
        kept.keep(outputs)
