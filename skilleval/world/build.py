"""Entry points of the world rules (thin wrappers the scripts call)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from safetensors.numpy import load_file

from skilleval.records.provenance import provenance
from skilleval.records.world import GroundTruth
from skilleval.skills.bank import load_bank
from skilleval.world.generate import ground_truth, outcome_table
from skilleval.world.shopsim import ShopWorld, Task, catalogue_from_json

log = logging.getLogger(__name__)


def build_ground_truth(
    catalogue: str,
    splits: str,
    checkpoints: Mapping[str, str],
    banks: Mapping[str, str],
    reference: Mapping[str, Any],
    output: str,
) -> None:
    split_data = json.loads(Path(splits).read_text())
    tasks = {s: [Task.from_json(t) for t in split_data[s]] for s in reference["splits"]}
    world = ShopWorld(
        catalogue_from_json(json.loads(Path(catalogue).read_text()), catalogue),
        [t for ts in tasks.values() for t in ts],
    )
    tables = {}
    for split, split_tasks in tasks.items():
        log.info("outcome table for %s (%d tasks)", split, len(split_tasks))
        tables[split] = outcome_table(world, split_tasks, reference["max_steps"])
    truth = ground_truth(
        tables,
        {name: load_file(path) for name, path in checkpoints.items()},
        {name: load_bank(path) for name, path in banks.items()},
        reference["temperature"],
    )
    GroundTruth.create(
        **truth,
        note="Expected reward of the sim policy, exact over its decisions and averaged over "
        "the split's tasks; chunk effects are single-chunk minus free on the same checkpoint.",
        provenance=provenance(),
    ).write(output)
