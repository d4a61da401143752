"""The ratio split files of each benchmark's candidate pool (memo 003 §2): sizes by
ablation/ratios.py, items shuffled with numpy seed 42 before slicing.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping, Sequence

import numpy as np

from skilleval.ablation.ratios import ratio_sizes
from skilleval.storage.records import Record

log = logging.getLogger(__name__)


class AblationSplit(Record):
    """One benchmark's train/val/test split of its candidate pool. Kept here, not in
    ablation/records.py, which is evidence code of every trainer run."""

    kind = "ablation_split"
    benchmark: str
    ratio: str
    seed: int
    sizes: dict[str, int]
    train: list[str]
    val: list[str]
    test: list[str]


def make_split(items: list[str], ratio: str, seed: int = 42) -> dict[str, list[str]]:
    sizes = ratio_sizes(len(items), ratio)
    order = [items[i] for i in np.random.default_rng(seed).permutation(len(items))]
    train, val = sizes["train"], sizes["val"]
    return {"train": order[:train], "val": order[train : train + val], "test": order[train + val :]}


def write_split(bench: str, pool: int, ratio: str, output: str) -> AblationSplit:
    """Split of the benchmark's candidate pool (item ids stand in for the real items)."""
    items = [f"{bench}-{i:05d}" for i in range(pool)]
    split = make_split(items, ratio)
    result = AblationSplit.create(
        benchmark=bench, ratio=ratio, seed=42, sizes={k: len(v) for k, v in split.items()}, **split
    )
    result.write(output)
    return result


def write_splits(pools: Mapping[str, int], ratios: Sequence[str], outputs: Sequence[str]) -> None:
    """Every benchmark's split at every ratio; ``outputs`` in benchmark-major order."""
    combos = list(itertools.product(pools, ratios))
    for (bench, ratio), output in zip(combos, outputs, strict=True):
        write_split(bench, pools[bench], ratio, output)
        log.info("split %s %s: %s", bench, ratio, output)
