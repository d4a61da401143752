"""Ratio splits of a candidate pool (memo 003 §2), by the integer rule of
``scripts/prepare_ablation_splits.py`` as its verified tables show it:

    val = round(0.1 * pool), train = round(a / 10 * pool) for ratio a-1-b,
    test = the rest; 1shot keeps one train and one val item.

Rounding is half-up. Items are shuffled with numpy seed 42 before slicing.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Mapping, Sequence

import numpy as np

from skilleval.ablation.records import AblationSplit

log = logging.getLogger(__name__)

RATIOS = ("1shot", "1-1-8", "2-1-7", "4-1-5")


def _round_half_up(x: float) -> int:
    return math.floor(x + 0.5)


def ratio_sizes(pool: int, ratio: str) -> dict[str, int]:
    if ratio == "1shot":
        train = val = 1
    elif ratio in RATIOS:
        train = _round_half_up(pool * int(ratio.split("-")[0]) / 10)
        val = _round_half_up(pool * 0.1)
    else:
        raise ValueError(f"unknown ratio {ratio!r}; use one of {RATIOS}")
    if train + val >= pool:
        raise ValueError(f"pool of {pool} items is too small for ratio {ratio}")
    return {"train": train, "val": val, "test": pool - train - val}


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
