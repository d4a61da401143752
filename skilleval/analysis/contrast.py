"""Contrasts between two runs and the control verdicts built on them.

A contrast is ``treatment - control`` on one metric, task-aligned. Its validity checks
are recorded by name; a failed check never drops the contrast silently: it is written
with the failure, and its verdict is ``invalid`` with the reason.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from skilleval.analysis.bootstrap import Method, align, paired_bootstrap, per_task_means
from skilleval.config.model import Statistics
from skilleval.errors import ComparisonError
from skilleval.paths import RunFiles
from skilleval.records.analysis import Contrast
from skilleval.records.checkpoints import CheckpointAudit
from skilleval.records.provenance import provenance
from skilleval.records.runs import RunSummary, TaskRecord
from skilleval.storage.records import Check, failed, read_records


@dataclass(frozen=True)
class RunRecords:
    name: str
    summary: RunSummary
    records: list[dict[str, Any]]

    @classmethod
    def load(cls, files: RunFiles) -> RunRecords:
        summary_path, results_path = Path(files.summary), Path(files.results)
        for path in (summary_path, results_path):
            if not path.exists():
                raise ComparisonError(
                    f"{path} does not exist: the run is missing or unfinished "
                    f"(build it with: snakemake --cores 1 {path})"
                )
        summary = RunSummary.read(summary_path)
        records = [
            TaskRecord.from_json(record, f"{results_path} line {number}").as_json()
            for number, record in enumerate(read_records(results_path, "task_record"), start=1)
        ]
        return cls(summary.run, summary, records)

    @classmethod
    def in_directory(cls, directory: str) -> RunRecords:
        """The run whose files are in ``directory`` (a folder the user names)."""
        return cls.load(RunFiles.in_directory(directory))


def run_checks(role: str, run: RunRecords) -> list[Check]:
    """Checks of one arm: coverage, an unchanged service, one writer."""
    coverage, expected = run.summary.coverage, run.summary.n_records
    service = run.summary.service
    single_writer = run.summary.execution.get("single_writer")
    writers = run.summary.provenance.get("writers") or {}
    checks = [
        Check(
            f"coverage_{role}",
            coverage >= 1.0 and len(run.records) == expected,
            f"{run.name}: coverage {coverage:.4f}, {len(run.records)} records of {expected}",
        ),
        Check(
            f"service_unchanged_{role}",
            run.summary.service_unchanged,
            f"{run.name}: service identity at start and end "
            + ("match" if run.summary.service_unchanged else f"differ: {service}"),
        ),
        resent_check(role, run),
        one_answerer_check(role, run),
        Check(
            f"single_writer_{role}",
            single_writer is True,
            # How many sessions wrote it is provenance: a resumed run has more.
            f"{run.name}: one writer at a time (sessions in its provenance.writers)"
            if single_writer is True
            else f"{run.name}: "
            + str(
                writers.get("single_writer_detail")
                or "no record of its writing sessions (a summary written before they were "
                "recorded): rebuild the run"
            ),
        ),
    ]
    return checks


# The share of an arm's episodes that may hold a model request re-sent after the client's
# timeout. Each re-send redraws a sample that a slow server made long, so these episodes
# can shift the mean by at most their share (rewards lie in [0, 1]): 1% stays under a
# quarter of the half-width of a 95% interval on the memo's 400 tasks (docs/failures.md).
RESENT_SHARE_LIMIT = 0.01


def resent_check(role: str, run: RunRecords) -> Check:
    """Whether the server's speed reached the arm's evidence: requests re-sent after their
    timeout are counted, and the check fails above RESENT_SHARE_LIMIT of its episodes."""
    resent = run.summary.resent_after_timeout
    if resent is None:
        return Check(
            f"resent_after_timeout_{role}",
            False,
            f"{run.name}: no count of re-sent requests (a summary written before they were "
            "counted): rebuild the run",
        )
    episodes = max(run.summary.n_records, 1)
    share = resent["episodes"] / episodes
    return Check(
        f"resent_after_timeout_{role}",
        share <= RESENT_SHARE_LIMIT,
        f"{run.name}: {resent['requests']} model request(s) re-sent after the client's "
        f"timeout, in {resent['episodes']} of {run.summary.n_records} episodes "
        f"({share:.1%}; at most {RESENT_SHARE_LIMIT:.0%} may be: raise "
        "execution.model_server.request_timeout_s)",
    )


def answered_identity(run: RunRecords) -> str | None:
    """The identity of what answered every episode of the run (runs.answered); None where
    the summary does not name one."""
    answered = run.summary.service.get("answered") or {}
    return answered.get("identity")


def one_answerer_check(role: str, run: RunRecords) -> Check:
    """Every episode of the arm was answered by the identity its summary names."""
    identity = answered_identity(run)
    found = Counter(
        str((r.get("answered") or {}).get("identity", "not stamped")) for r in run.records
    )
    ok = identity is not None and set(found) == {identity}
    detail = (
        f"{run.name}: all {len(run.records)} episodes answered by {identity}"
        if ok
        else f"{run.name}: episodes by what answered them {dict(found)}, summary names "
        f"{identity}: "
        + (
            "a run written before episodes were stamped: rebuild it"
            if identity is None or "not stamped" in found
            else "the run mixes models: archive it and build it again"
        )
    )
    return Check(f"one_answerer_{role}", ok, detail)


def answerer_checks(control: RunRecords, treatment: RunRecords) -> list[Check]:
    """Arms that register one checkpoint were answered by one identity; arms of two
    checkpoints by two, where the server reports the weights it serves."""
    identities = (answered_identity(control), answered_identity(treatment))
    server = [(r.summary.service.get("answered") or {}).get("server") for r in (control, treatment)]
    said = f"{control.name}: {server[0]}; {treatment.name}: {server[1]}"
    if control.summary.checkpoint_fingerprint == treatment.summary.checkpoint_fingerprint:
        same = identities[0] is not None and identities[0] == identities[1]
        return [Check("same_answerer", same, f"one checkpoint registered; {said}")]
    weights = [
        (r.summary.service.get("answered") or {}).get("weights") for r in (control, treatment)
    ]
    if not all(weights):
        return []  # nothing reported ties an answer to weights (identity: trust, docs)
    return [
        Check(
            "distinct_answerers",
            identities[0] != identities[1],
            f"two checkpoints registered; {said}",
        )
    ]


def checkpoint_check(role: str, run: RunRecords, audit_path: str) -> Check:
    audit = CheckpointAudit.read(audit_path)
    recorded = run.summary.checkpoint_fingerprint
    ok = audit.passed and audit.fingerprint == recorded
    detail = f"{audit.checkpoint_id}: " + (
        "audit passed, fingerprint matches the run"
        if ok
        else "; ".join(c.detail for c in failed(audit.checks))
        or f"fingerprint {audit.fingerprint} != run's {recorded}"
    )
    return Check(f"checkpoint_audit_{role}", ok, detail)


def validity_checks(
    control: RunRecords, treatment: RunRecords, audits: list[str] | None = None
) -> list[Check]:
    """Named pass/fail checks; ``audits`` are the checkpoint audits of (control, treatment)."""
    control_audit, treatment_audit = audits or (None, None)
    checks = run_checks("control", control) + run_checks("treatment", treatment)
    checks += answerer_checks(control, treatment)
    same_protocol = control.summary.protocol_fingerprint == treatment.summary.protocol_fingerprint
    checks.append(
        Check(
            "same_protocol",
            same_protocol,
            f"{control.name}: {control.summary.protocol}, "
            f"{treatment.name}: {treatment.summary.protocol}",
        )
    )
    for role, run, audit_path in (
        ("control", control, control_audit),
        ("treatment", treatment, treatment_audit),
    ):
        if audit_path is not None:
            checks.append(checkpoint_check(role, run, audit_path))
    tasks_c = {r["task_id"] for r in control.records}
    tasks_t = {r["task_id"] for r in treatment.records}
    checks.append(
        Check(
            "same_tasks",
            tasks_c == tasks_t,
            f"{len(tasks_c)} vs {len(tasks_t)} tasks, {len(tasks_c ^ tasks_t)} not shared",
        )
    )
    return checks


def compare(
    control: RunRecords,
    treatment: RunRecords,
    *,
    metric: str = "reward",
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
    method: Method = "percentile",
    checks: list[Check] | None = None,
) -> dict[str, Any]:
    """The contrast treatment - control; raises ComparisonError when it is not valid.

    ``checks`` are the validity checks when the caller already ran them (with audits).
    """
    checks = validity_checks(control, treatment) if checks is None else checks
    if failed(checks):
        reasons = "; ".join(f"{c.name}: {c.detail}" for c in failed(checks))
        raise ComparisonError(f"cannot compare {treatment.name} with {control.name}: {reasons}")
    pairs = align(
        per_task_means(control.records, metric, control.name),
        per_task_means(treatment.records, metric, treatment.name),
        (control.name, treatment.name),
    )
    result = paired_bootstrap(
        pairs,
        rng=np.random.default_rng(seed),
        n_resamples=n_resamples,
        confidence=confidence,
        method=method,
        seed=seed,
    )
    return {
        "metric": metric,
        "control": control.name,
        "treatment": treatment.name,
        "checks": [c.as_json() for c in checks],
        "control_fingerprint": control.summary.fingerprint,
        "treatment_fingerprint": treatment.summary.fingerprint,
        "protocol_fingerprint": control.summary.protocol_fingerprint,
        **result.as_json(),
        "distribution_quantiles": {
            str(q): float(np.quantile(result.distribution, q))
            for q in (0.005, 0.025, 0.05, 0.25, 0.5, 0.75, 0.95, 0.975, 0.995)
        },
    }


def build_contrast(
    name: str,
    spec: dict[str, Any],
    statistics: Statistics,
    control_files: RunFiles,
    treatment_files: RunFiles,
    output: str,
    audits: list[str] | None = None,
) -> dict[str, Any]:
    """Graph entry point: always writes the contrast, with its checks, even when invalid."""
    control, treatment = RunRecords.load(control_files), RunRecords.load(treatment_files)
    checks = validity_checks(control, treatment, audits)
    contrast: dict[str, Any] = {
        "name": name,
        "causal": spec["causal"],
        "checks": [c.as_json() for c in checks],
    }
    try:
        contrast.update(
            compare(
                control,
                treatment,
                metric=spec.get("metric", "reward"),
                n_resamples=statistics.n_resamples,
                confidence=statistics.confidence,
                seed=statistics.seed,
                method=statistics.method,
                checks=checks,
            )
        )
        contrast["error"] = None
    except ComparisonError as error:
        contrast.update(
            {
                "estimate": None,
                "ci_low": None,
                "ci_high": None,
                "error": str(error),
                "control": control.name,
                "treatment": treatment.name,
            }
        )
    contrast["provenance"] = provenance()
    Contrast.create(**contrast).write(output)
    return contrast
