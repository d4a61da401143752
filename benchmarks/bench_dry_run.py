"""No-op dry run of the paper against Snakemake's floor (issue 12 target: ratio <= 1.3),
and ``skilleval stale`` on the same built graph (issue 7 target: under 3 s).

Builds the paper graph (small world) in a temporary copy, then times, in one run and
interleaved so machine noise hits all three alike:

* ``snakemake -n paper`` on the built graph (nothing to do),
* ``snakemake -n`` of a trivial workflow with the same number of jobs (one touch rule per
  job, with params, all built), which is what Snakemake itself costs for a graph of that
  size (with params, as Snakemake imports pandas to record them:
  snakemake/persistence/__init__.py), and
* ``skilleval stale`` on the built graph (its dry run, mapped to the paper's cells). The
  small world has the full world's 81 jobs; only its data are smaller.

Prints medians and the ratio; asserts nothing. SKILLEVAL_BENCH_SIZE=tiny times each once.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PARTS = ("Snakefile", "rules", "scripts", "config", "envs", "profiles", "report", "paper")
REPEATS = 1 if os.environ.get("SKILLEVAL_BENCH_SIZE") == "tiny" else 7
SMALL = ("--configfile", "config/small.yaml")
# skilleval stale takes every config file as given to snakemake, the default one included.
CONFIGS = ("config/config.yaml", "config/small.yaml")


def python_module(workdir: Path, module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m MODULE ARGS`` in ``workdir``; a failure (a stale graph too: skilleval
    stale exits 1) stops the benchmark rather than timing the wrong work."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=workdir,
        check=True,
        capture_output=True,
        text=True,
    )


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return python_module(workdir, "snakemake", *args)


def timed(workdir: Path, module: str, *args: str) -> float:
    start = time.perf_counter()
    python_module(workdir, module, *args)
    return time.perf_counter() - start


def paper_graph(root: Path) -> Path:
    """The small paper, built; a copy of SKILLEVAL_BENCH_BUILT_GRAPH where the caller has
    one built already (the test suite's), which only the no-op runs below are timed on."""
    workdir = root / "paper-graph"
    built = os.environ.get("SKILLEVAL_BENCH_BUILT_GRAPH")
    if built:
        shutil.copytree(built, workdir, symlinks=True)
        return workdir
    workdir.mkdir()
    for part in PARTS:
        source = REPO / part
        if source.is_dir():
            ignore = shutil.ignore_patterns("tables", "figures", "*.pdf", "__pycache__")
            shutil.copytree(source, workdir / part, ignore=ignore)
        else:
            shutil.copy(source, workdir / part)
    shutil.copy(REPO / "tests/data/small.yaml", workdir / "config/small.yaml")
    shutil.copy(workdir / "config/ablation/matrix.yaml", workdir / "config/ablation/planted.yaml")
    snakemake(workdir, "paper", "-j", "2", *SMALL)
    return workdir


def trivial_graph(root: Path, jobs: int) -> Path:
    workdir = root / "trivial-graph"
    workdir.mkdir()
    (workdir / "Snakefile").write_text(
        f"rule all:\n    input: expand('out/{{i}}.txt', i=range({jobs - 1}))\n\n"
        "rule leaf:\n    output: 'out/{i}.txt'\n    params: n=lambda w: int(w.i)\n"
        "    shell: 'touch {output}'\n"
    )
    snakemake(workdir, "-j", "2")
    return workdir


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-dry-run-"))
    paper = paper_graph(root)
    forced = snakemake(paper, "paper", "-n", "--forceall", *SMALL)
    jobs = int(re.findall(r"^total\s+(\d+)", forced.stdout + forced.stderr, re.M)[-1])
    trivial = trivial_graph(root, jobs)
    paper_times, trivial_times, stale_times = [], [], []
    for _ in range(REPEATS):
        paper_times.append(timed(paper, "snakemake", "paper", "-n", *SMALL))
        trivial_times.append(timed(trivial, "snakemake", "-n"))
        stale_times.append(timed(paper, "skilleval.cli", "stale", "--configfile", *CONFIGS))
    paper_s, trivial_s = statistics.median(paper_times), statistics.median(trivial_times)
    print(f"jobs in the paper graph: {jobs}")
    print(f"no-op 'snakemake -n paper' (built graph): median {paper_s:.2f} s of {REPEATS}")
    print(f"no-op 'snakemake -n', trivial workflow, {jobs} jobs: median {trivial_s:.2f} s")
    print(f"ratio: {paper_s / trivial_s:.2f} (target <= 1.3)")
    print(f"'skilleval stale' (built graph): median {statistics.median(stale_times):.2f} s "
          f"of {REPEATS} (target < 3 s)")  # fmt: skip
    shutil.rmtree(root)


if __name__ == "__main__":
    main()
