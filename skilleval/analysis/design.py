"""The Gate A mask design: which draft chunks each masked run shows each task.

Drawn from config seeds before any result is seen; it depends on the bank's chunk ids
and the split's task ids, nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence

from skilleval.analysis.rng import rng_record, seeded
from skilleval.records.analysis import GateDesign
from skilleval.runs.tasks import load_task_ids
from skilleval.skills.bank import load_bank


def build_design(
    chunk_ids: Sequence[str],
    task_ids: Sequence[str],
    run_names: Sequence[str],
    inclusion_probability: float,
    seed: int,
) -> GateDesign:
    rng = seeded(seed)
    runs = {}
    for name in run_names:
        bits = rng.random((len(task_ids), len(chunk_ids))) < inclusion_probability
        runs[name] = {t: [int(b) for b in row] for t, row in zip(task_ids, bits, strict=True)}
    return GateDesign.create(
        chunk_ids=list(chunk_ids),
        seed=seed,
        rng=rng_record(seed),
        inclusion_probability=inclusion_probability,
        runs=runs,
    )


def write_design(
    bank_path: str,
    split_file: str,
    split: str,
    runs: Sequence[str],
    probability: float,
    seed: int,
    output: str,
) -> None:
    chunk_ids = [s.chunk_id for s in load_bank(bank_path)]
    task_ids = load_task_ids(split_file, split)
    build_design(chunk_ids, task_ids, runs, probability, seed).write(output)
