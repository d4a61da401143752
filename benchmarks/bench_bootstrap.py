"""Speed of the contrasts: 10,000 paired resamples over 400 tasks for all five contrasts.

Target (issue 3): under 1 s together. Prints the figures; asserts nothing.

SKILLEVAL_BENCH_SIZE=tiny runs it at a tiny size.
"""

from __future__ import annotations

import os
import time

import numpy as np

from skilleval.analysis.bootstrap import AlignedPairs, paired_bootstrap

N_TASKS, N_RESAMPLES, N_CONTRASTS, REPEATS = 400, 10_000, 5, 5
# The suite runs every benchmark at a tiny size so none can rot (tests/test_benchmarks.py).
if os.environ.get("SKILLEVAL_BENCH_SIZE") == "tiny":
    N_TASKS, N_RESAMPLES, REPEATS = 40, 200, 1


def main() -> None:
    rng = np.random.default_rng(0)
    pairs = [
        AlignedPairs(
            tuple(f"t{i}" for i in range(N_TASKS)),
            rng.random(N_TASKS),
            rng.random(N_TASKS),
        )
        for _ in range(N_CONTRASTS)
    ]
    timings = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        for p in pairs:
            paired_bootstrap(p, rng=np.random.default_rng(1), n_resamples=N_RESAMPLES)
        timings.append(time.perf_counter() - start)
    print(f"{N_CONTRASTS} contrasts x {N_RESAMPLES} resamples x {N_TASKS} tasks")
    print(f"  best {min(timings):.3f} s, median {np.median(timings):.3f} s (target < 1 s)")


if __name__ == "__main__":
    main()
