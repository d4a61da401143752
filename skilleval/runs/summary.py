"""What a run's summary says: the means of its metrics, its coverage and endings, what
answered it, and how it was written."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from skilleval.records.provenance import provenance
from skilleval.runs.backends import metric_contract
from skilleval.runs.inputs import RunInputs, protocol_evidence
from skilleval.runs.journal import Journal
from skilleval.runs.resolve import ResolvedRun
from skilleval.runs.runner import RunStats
from skilleval.serving.service import Service, simulation


def summarise(
    records: list[dict[str, Any]], n_expected: int, metrics: Sequence[str]
) -> dict[str, Any]:
    """The run's means of the protocol's declared ``metrics`` (every episode holds them:
    env.metrics checks each as it is recorded), its coverage, tokens and endings."""
    metrics = sorted(metrics)
    summary: dict[str, Any] = {
        "n_records": len(records),
        "n_tasks": len({r["task_id"] for r in records}),
        "coverage": len(records) / n_expected,
    }
    for metric in metrics:
        summary[metric] = float(np.mean([r[metric] for r in records]))
    summary["metrics"] = metrics
    summary["tokens"] = {
        "total": int(sum(r["tokens"] for r in records)),
        "mean_per_task": float(np.mean([r["tokens"] for r in records])),
        "completion_total": int(sum(r["completion_tokens"] for r in records)),
    }
    summary["steps_mean"] = float(np.mean([r["steps"] for r in records]))
    summary["stop_reasons"] = dict(Counter(r["stop_reason"] for r in records))
    summary["task_errors"] = sum(r["error"] is not None for r in records)
    resent = [int(r.get("resent_after_timeout", 0)) for r in records]
    summary["resent_after_timeout"] = {
        "requests": sum(resent),
        "episodes": sum(n > 0 for n in resent),
    }
    return summary


def run_summary(
    inputs: RunInputs,
    resolved: ResolvedRun,
    records: list[dict[str, Any]],
    service: Service,
    identities: tuple[dict[str, Any], dict[str, Any]],
) -> dict[str, Any]:
    """What the run's summary says of its evidence and of what answered it."""
    return {
        "run": inputs.run,
        "experiment": inputs.experiment,
        **resolved.identity.parts,
        "fingerprint": resolved.fingerprint,
        "protocol_values": protocol_evidence(inputs.protocol),
        "chunk_hashes": resolved.chunk_hashes,
        "prompt_files": prompt_files(inputs),
        "repeats": inputs.protocol.runtime.repeats,
        **summarise(records, len(resolved.keys), metric_contract(inputs, None).names),
        "service": {
            **service_ends(*identities),
            "identity_check": service.identity_check,
            "answered": service.answered(),
        },
        "simulated": simulation(service),
    }


def prompt_files(inputs: RunInputs) -> dict[str, str]:
    """Which prompt files the run was given, for the paper's tables (prompt_hash is the
    identity of their contents)."""
    return {
        "system": Path(inputs.system_prompt_file).name,
        "skill_template": Path(inputs.skill_template_file).name,
    }


def written(journal: Journal, stats: RunStats, started: float) -> dict[str, Any]:
    """How the run was written: whether by one writer at a time (storage.writers), and as
    provenance (hosts, pids and times differ build to build) its writing sessions and how
    the build went."""
    check = journal.writer_check()
    return {
        "execution": {"journal": str(journal.path), "single_writer": check.single_writer},
        "provenance": {
            **provenance(),
            "execution": execution(stats, started),
            "writers": {
                "sessions": [session.as_json() for session in journal.writing_sessions()],
                **check.as_json(),
            },
        },
    }


def service_ends(start: dict[str, Any], end: dict[str, Any]) -> dict[str, Any]:
    return {"start": start, "end": end, "unchanged": start == end}


def execution(stats: RunStats, started: float) -> dict[str, Any]:
    """How this build went (resumed or fresh, retries, time): provenance, since a resumed
    run's evidence is the same as a fresh one's."""
    return {
        "reused_from_journal": stats.reused,
        "ran": stats.done,
        "infra_retries": stats.retried,
        "infra_errors": stats.infra_errors,
        "retries": stats.ledger.snapshot(),
        "wall_s": round(time.monotonic() - started, 3),
    }
