"""One evaluation run: tasks x policy x environment -> journal -> declared outputs.

The run's fingerprint covers everything its per-task results depend on; the journal is
keyed by it, so an interrupted run resumes, and a run whose inputs changed starts afresh
while its old journal is archived.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from skilleval import atomic
from skilleval.backends import make_environment, make_policy, make_service
from skilleval.banks import bank_hash, load_bank, system_prompt
from skilleval.checkpoints import checkpoint_fingerprint
from skilleval.errors import CoverageError, SkillevalError
from skilleval.inputs import RunInputs
from skilleval.journal import Journal, RecordKey
from skilleval.policy.sim import SIM_POLICY_VERSION
from skilleval.provenance import canonical_hash, file_sha256, provenance
from skilleval.rollout import run_episode
from skilleval.runner import RetryPolicy, run_episodes
from skilleval.types import Skill

log = logging.getLogger(__name__)


def protocol_fingerprint(protocol_name: str, protocol: dict[str, Any]) -> str:
    values = {k: v for k, v in protocol.items() if k != "description"}
    return canonical_hash({"name": protocol_name, **values})


def load_task_ids(split_file: str, split: str) -> list[str]:
    data = json.loads(Path(split_file).read_text())
    if split not in data:
        raise SkillevalError(f"{split_file}: no split {split!r}; it has {sorted(data)}")
    return [t["task_id"] if isinstance(t, dict) else str(t) for t in data[split]]


def identity(inputs: RunInputs, ck_fingerprint: str, skills_hash: str | None) -> dict[str, Any]:
    return {
        "protocol": inputs.protocol_name,
        "protocol_fingerprint": protocol_fingerprint(inputs.protocol_name, inputs.protocol),
        "checkpoint_id": inputs.checkpoint_id,
        "checkpoint_fingerprint": ck_fingerprint,
        "bank": inputs.bank_name,
        "bank_hash": skills_hash,
        "split": inputs.split,
        "split_hash": file_sha256(inputs.split_file),
        "backends": dict(sorted(inputs.backends.items())),
        # Journals of the sim policy are only valid for the behaviour they were made with.
        "sim_policy_version": SIM_POLICY_VERSION if inputs.backends["policy"] == "sim" else None,
    }


def task_prompts(skills: list[Skill], task_ids: list[str], inputs: RunInputs) -> dict[str, str]:
    """System prompt per task: the whole bank, or the task's mask of it (Gate A runs)."""
    if not inputs.mask_path:
        prompt = system_prompt(skills)
        return dict.fromkeys(task_ids, prompt)
    design = json.loads(Path(inputs.mask_path).read_text())
    chunk_ids = design["chunk_ids"]
    if [s.chunk_id for s in skills] != chunk_ids:
        raise SkillevalError(
            f"{inputs.mask_path}: mask design was made for chunks {chunk_ids}, but "
            f"{inputs.bank_path} holds {[s.chunk_id for s in skills]}; rebuild the design"
        )
    masks = design["runs"][inputs.mask_run]
    missing = sorted(set(task_ids) - set(masks))
    if missing:
        raise SkillevalError(f"{inputs.mask_path}: no mask for tasks {missing[:3]}")
    return {
        t: system_prompt([s for s, bit in zip(skills, masks[t], strict=True) if bit])
        for t in task_ids
    }


def chunk_hashes(inputs: RunInputs) -> dict[str, str]:
    """Hash of every injected chunk, so a stale report can name the chunk that changed."""
    if not inputs.bank_path:
        return {}
    return {s.chunk_id: bank_hash([s])[:16] for s in load_bank(inputs.bank_path)}


def summarise(records: list[dict[str, Any]], n_expected: int) -> dict[str, Any]:
    metrics = sorted(k for k in records[0] if k == "reward" or k.startswith("r_"))
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
    return summary


def evaluate(
    inputs: RunInputs,
    results_path: str,
    summary_path: str,
    journal_root: str,
    fault_rate: float = 0.0,
    retry: RetryPolicy | None = None,
) -> dict[str, Any]:
    started = time.monotonic()
    runtime = inputs.protocol["runtime"]
    ck_fingerprint = checkpoint_fingerprint(inputs.checkpoint_path)
    expected = inputs.checkpoint_expected_fingerprint
    if expected is not None and expected != ck_fingerprint:
        raise SkillevalError(
            f"checkpoint {inputs.checkpoint_id} at {inputs.checkpoint_path} has fingerprint "
            f"{ck_fingerprint}, but the registry expects {expected}: the weights changed. "
            "Register the new weights under a new checkpoint_id (and experiment name)."
        )
    skills = load_bank(inputs.bank_path, inputs.bank_chunks) if inputs.bank_path else []
    ident = identity(inputs, ck_fingerprint, bank_hash(skills) if inputs.bank_path else None)
    fingerprint = canonical_hash(ident)[:24]
    task_ids = load_task_ids(inputs.split_file, inputs.split)
    keys: list[RecordKey] = [(t, r) for t in task_ids for r in range(runtime["repeats"])]
    prompts = task_prompts(skills, task_ids, inputs)
    if inputs.mask_path:
        ident["mask_hash"] = canonical_hash(prompts)
        fingerprint = canonical_hash(ident)[:24]
    with served(inputs):
        return _evaluate(
            inputs,
            ident,
            fingerprint,
            keys,
            prompts,
            results_path,
            summary_path,
            journal_root,
            fault_rate,
            retry,
            started,
        )


def served(inputs: RunInputs) -> contextlib.AbstractContextManager[None]:
    """The model server for the run: launched on leased GPUs, or nothing to do."""
    kind = inputs.backends.get("model_server", "none")
    if kind not in ("process", "docker"):
        return contextlib.nullcontext()
    return _launched(inputs, kind)


@contextlib.contextmanager
def _launched(inputs: RunInputs, kind: str) -> Iterator[None]:
    from urllib.parse import urlparse

    from skilleval.gpu import allowed_devices, gpu_lease
    from skilleval.serving import launched_server

    server = inputs.protocol["model_server"]
    count = int(server["tp"]) * int(server["dp_size"])
    allowed, protected = allowed_devices()
    port = urlparse(server["base_url"]).port or 30000
    with gpu_lease(count, allowed, protected=protected) as lease:
        log.info("run %s: GPUs %s leased for the model server", inputs.run, lease.visible_devices)
        with launched_server(kind, inputs.checkpoint_path, server, lease.visible_devices, port):
            yield


def _evaluate(
    inputs: RunInputs,
    ident: dict[str, Any],
    fingerprint: str,
    keys: list[RecordKey],
    prompts: dict[str, str],
    results_path: str,
    summary_path: str,
    journal_root: str,
    fault_rate: float,
    retry: RetryPolicy | None,
    started: float,
) -> dict[str, Any]:
    runtime = inputs.protocol["runtime"]
    service = make_service(inputs)
    service_start = service.check()
    policy = make_policy(inputs, service, fault_rate=fault_rate)
    environment = make_environment(inputs)
    log.info(
        "run %s (%s): fingerprint %s, %d episodes, protocol %s",
        inputs.run,
        inputs.experiment,
        fingerprint,
        len(keys),
        inputs.protocol_name,
    )

    def episode(task_id: str, repeat: int) -> Any:
        prompt = prompts[task_id]
        return run_episode(policy, environment, task_id, prompt, runtime["max_steps"], repeat)

    with Journal(Path(journal_root), inputs.run, fingerprint, ident) as journal:
        stats = run_episodes(
            keys,
            episode,
            journal,
            runtime["concurrency"],
            runtime["episode_timeout_s"],
            inputs.run,
            retry,
        )
        records = [journal.records[k] for k in sorted(keys) if k in journal.records]
        journal_path = str(journal.path)
    required = inputs.protocol["metrics"]["required_coverage"]
    if len(records) / len(keys) < required:
        raise CoverageError(
            f"run {inputs.run!r}: coverage {len(records)}/{len(keys)} is below the required "
            f"{required}; finished tasks are kept in {journal_path}. Re-run to resume."
        )
    service_end = service.identity()
    summary = {
        "run": inputs.run,
        "experiment": inputs.experiment,
        **ident,
        "fingerprint": fingerprint,
        "protocol_values": {k: v for k, v in inputs.protocol.items() if k != "description"},
        "chunk_hashes": chunk_hashes(inputs),
        "repeats": runtime["repeats"],
        **summarise(records, len(keys)),
        "service": {
            "start": service_start,
            "end": service_end,
            "unchanged": service_start == service_end,
        },
        "execution": {
            "reused_from_journal": stats.reused,
            "ran": stats.done,
            "infra_retries": stats.retried,
            "infra_errors": stats.infra_errors,
            "wall_s": round(time.monotonic() - started, 3),
            "journal": journal_path,
            "writers": 1,
        },
        "provenance": provenance(),
    }
    atomic.write_jsonl(results_path, records)
    atomic.write_json(summary_path, summary)
    log.info(
        "run %s done: reward %.4f, r_success %.4f, coverage %.3f",
        inputs.run,
        summary["reward"],
        summary["r_success"],
        summary["coverage"],
    )
    return summary
