"""Ratio sizes of a candidate pool (memo 003 §2), by the integer rule of
``scripts/prepare_ablation_splits.py`` as its verified tables show it:

    val = round(0.1 * pool), train = round(a / 10 * pool) for ratio a-1-b,
    test = the rest; 1shot keeps one train and one val item.

Rounding is half-up. A trainer run's train size comes from here, so this module is
evidence code of every trainer run. The split files (ablation/splits.py) are not: a
command trainer's runs take the split directory as an input (its digests), so an edit to
how the files are written re-plans only the runs whose split files come out different.
"""

from __future__ import annotations

import math

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
