"""Graph entry point of one ablation run: build it, then audit it.

Given its evidence identity (provenance.identity, from workflow.rule_inputs) and where
complete runs are kept, a run whose identity equals that of a kept complete run restores
that run's summary and audit byte for byte and launches no trainer.

The sim trainer's runs are built in one process (build_and_audit_all); a run of the command
trainer is a job of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from skilleval.ablation.audit import write_audit
from skilleval.ablation.matrix import load_matrix
from skilleval.ablation.plan import PlannedRun, audit_path, plan
from skilleval.ablation.trainer import build_run
from skilleval.config.matrix import Matrix
from skilleval.errors import SkillevalError
from skilleval.storage.kept import KeptOutputs

log = logging.getLogger(__name__)


def build_and_audit(
    run: PlannedRun,
    matrix: Matrix,
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
    log.info("ablation run %s: training with the %s trainer", run.run_id, matrix.trainer.kind)
    build_run(run, matrix, summary_path)
    write_audit(run, matrix, summary_path, audit_path)
    if kept is not None:
        kept.keep(outputs)


def build_and_audit_all(matrix_file: str, identities: Mapping[str, str], kept_root: str) -> None:
    """Build and audit the runs named in ``identities`` (run id -> evidence identity). A run
    that fails does not stop the others: each complete run is kept as soon as it is done,
    so the next build restores it and redoes only the failed ones."""
    matrix = load_matrix(matrix_file)
    runs = {run.run_id: run for run in plan(matrix)}
    unknown = sorted(set(identities) - set(runs))
    if unknown:
        raise SkillevalError(f"{', '.join(unknown)}: not in the plan of {matrix_file}")
    failed: dict[str, str] = {}
    for done, (run_id, identity) in enumerate(identities.items(), start=1):
        run = runs[run_id]
        try:
            build_and_audit(run, matrix, run.summary_path, audit_path(run), identity, kept_root)
        except SkillevalError as error:
            log.error("ablation run %s failed: %s", run_id, error)
            failed[run_id] = str(error)
        if done % 24 == 0 or done == len(identities):
            log.info("ablation runs: %d of %d done, %d failed", done, len(identities), len(failed))
    if failed:
        raise SkillevalError(
            f"{len(failed)} of {len(identities)} ablation runs failed "
            f"({', '.join(sorted(failed))}); the others are kept under {kept_root} and the "
            "next build restores them. First error: " + next(iter(failed.values()))
        )
