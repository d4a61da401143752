"""Speed of the evaluation graph on the default world (issue 2 targets).

1. The four test runs (400 tasks each) built by Snakemake from a built world:
   target under 60 s on 2 cores.
2. A no-op ``snakemake -n paper`` on the built graph: target under 2 s. Snakemake's
   own start-up (``snakemake --version``) is timed in the same run, so the share of the
   workflow itself is visible on a noisy machine.

Runs in a temporary copy of the workflow; prints figures, asserts nothing.
SKILLEVAL_BENCH_SIZE=tiny builds the small world (tests/data/small.yaml) and times once;
with SKILLEVAL_BENCH_BUILT_GRAPH (a built small paper, as the suite has one) it times the
no-op dry run there instead of building the paper again.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PARTS = ("Snakefile", "rules", "scripts", "config", "envs", "profiles", "report", "paper")
RUNS = ("base-free", "base-S0", "final-free", "final-ST")
TINY = os.environ.get("SKILLEVAL_BENCH_SIZE") == "tiny"
SIZE = ("--configfile", str(REPO / "tests/data/small.yaml")) if TINY else ()
REPEATS = 1 if TINY else 5
TASKS = 40 if TINY else 400


def snakemake(workdir: Path, *args: str) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "snakemake", *args], cwd=workdir, check=True, capture_output=True
    )
    return time.perf_counter() - start


def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="bench-graph-"))
    for part in PARTS:
        source = REPO / part
        if source.is_dir():
            shutil.copytree(
                source, workdir / part, ignore=shutil.ignore_patterns("tables", "figures", "*.pdf")
            )
        else:
            shutil.copy(source, workdir / part)
    if TINY:
        shutil.copy(
            workdir / "config/ablation/matrix.yaml", workdir / "config/ablation/planted.yaml"
        )
    runs = [f"results/runs/{r}/summary.json" for r in RUNS]
    world = snakemake(
        workdir,
        *runs,
        "-j",
        "2",
        "--until",
        "world_tasks",
        "world_checkpoint",
        "world_bank",
        *SIZE,
    )
    four = snakemake(workdir, "-j", "2", *runs, *SIZE)
    built = os.environ.get("SKILLEVAL_BENCH_BUILT_GRAPH") if TINY else None
    if built:  # a copy: the suite's build is read by other tests at the same time
        workdir = workdir.with_name(f"{workdir.name}-paper")
        shutil.copytree(built, workdir, symlinks=True)
        size = ("--configfile", "config/small.yaml")
    else:
        snakemake(workdir, "-j", "2", "paper", *SIZE)
        size = SIZE
    startup = [snakemake(workdir, "--version") for _ in range(REPEATS)]
    noop = [snakemake(workdir, "-n", "paper", *size) for _ in range(REPEATS)]
    print(f"world files: {world:.1f} s")
    print(f"four runs x {TASKS} tasks (snakemake -j 2): {four:.1f} s (target < 60 s at 400)")
    print(
        f"no-op 'snakemake -n paper': median {statistics.median(noop):.2f} s "
        f"(target < 2 s); 'snakemake --version' alone: median "
        f"{statistics.median(startup):.2f} s; workflow share: "
        f"{statistics.median(noop) - statistics.median(startup):.2f} s"
    )


if __name__ == "__main__":
    main()
