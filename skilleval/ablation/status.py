"""Status of every planned run, read from the files the graph builds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from skilleval.ablation.plan import PlannedRun, audit_path, plan, plan_fingerprint
from skilleval.config.matrix import Matrix
from skilleval.records.ablation import AblationAudit, AblationSummary


def run_status(run: PlannedRun, matrix: Matrix, root: Path) -> str:
    summary = root / run.summary_path
    audit = root / audit_path(run)
    if summary.exists():
        data = AblationSummary.read(summary)
        if data.plan_fingerprint != plan_fingerprint(run, matrix):
            return "stale"
        if audit.exists() and not AblationAudit.read(audit).valid:
            return "invalid"
        return "done"
    lock_path = root / run.lock_path
    if lock_path.exists():
        lock = FileLock(str(lock_path))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            return "running"
        lock.release()
    return "pending"


def plan_table(matrix: Matrix, root: Path) -> list[dict[str, Any]]:
    return [{**run.as_json(), "status": run_status(run, matrix, root)} for run in plan(matrix)]


def format_overrides(overrides: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in overrides.items())


def render_plan(rows: list[dict[str, Any]]) -> str:
    from collections import Counter

    import pandas as pd

    frame = pd.DataFrame(
        [
            {
                "id": r["id"],
                "section": r["section"],
                "benchmark": r["benchmark"],
                "group": r["group"],
                "status": r["status"],
                "setting": format_overrides(r["setting"])[:90],
            }
            for r in rows
        ]
    )
    sections = Counter(r["section"] for r in rows)
    statuses = Counter(r["status"] for r in rows)
    footer = "\nper section: " + ", ".join(f"{k} {v}" for k, v in sections.items())
    footer += f"\ntotal {len(rows)}; " + ", ".join(f"{k} {v}" for k, v in statuses.items())
    return str(frame.to_string(index=False)) + footer
