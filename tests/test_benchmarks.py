"""Every script under benchmarks/ runs at its tiny size (SKILLEVAL_BENCH_SIZE=tiny), so
none can rot unseen: a crash or a figure line it no longer prints fails here. The figures
themselves are for people and are not judged."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# Three of them build the small paper: end-to-end runs, left out of the lowest-versions run.
pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parent.parent
# Each benchmark under benchmarks/: its arguments at the tiny size, and what it prints
# when it gets to its figures. A new script needs a line here.
BENCHMARKS = {
    "bench_bootstrap.py": ((), "5 contrasts x 200 resamples x 40 tasks"),
    "bench_checkpoint_diff.py": ((), "cpu: peak RSS"),
    "bench_coverage_study.py": ((), "chosen interval method:"),
    "bench_dry_run.py": ((), "ratio:"),
    "bench_eval_graph.py": ((), "no-op 'snakemake -n paper'"),
    "bench_gpu_phase.py": ((), "GPU 0 leased: False"),
    "bench_http_throughput.py": ((), "results identical task by task: True"),
    "bench_suite_tiers.py": ((), "fast tier  pytest -q -m 'not slow'"),
    "gpu_leases/run.py": (
        ("--fake-gpus", "4", "--jobs", "3", "--hold", "0.2"),
        "jobs that got GPU 0: 0",
    ),
}
# Benchmarks that drive the SLURM test cluster: tests/test_slurm.py runs them at their tiny
# size on the session's cluster, as a second cluster cannot start beside it.
ON_THE_CLUSTER = {"bench_cluster_ablation.py": ((), "jobs per minute")}
# Scripts under benchmarks/ that are parts of a benchmark, run by its workflow.
PARTS = {"gpu_leases/no_lease.py": "a job of the lease probe (tests/test_gpu.py runs it)"}
SCRIPTS = sorted(
    str(p.relative_to(REPO / "benchmarks")) for p in (REPO / "benchmarks").rglob("*.py")
)


def test_every_benchmark_is_listed() -> None:
    assert sorted([*BENCHMARKS, *ON_THE_CLUSTER, *PARTS]) == SCRIPTS


@pytest.mark.parametrize("script", sorted(BENCHMARKS))
def test_benchmark_runs_tiny(script: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    env = dict(os.environ)
    if script in ("bench_dry_run.py", "bench_eval_graph.py"):  # the session's build serves
        env["SKILLEVAL_BENCH_BUILT_GRAPH"] = str(request.getfixturevalue("small_paper_build")[0])
    run_tiny(script, *BENCHMARKS[script], env, tmp_path)


def run_tiny(
    script: str, args: tuple[str, ...], prints: str, env: dict[str, str], tmp_path: Path
) -> None:
    """``script`` at its tiny size: it exits 0 and gets as far as its figures."""
    env = {**env, "SKILLEVAL_BENCH_SIZE": "tiny", "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / script), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=500,
    )
    assert done.returncode == 0, f"{script} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert prints in done.stdout, f"{script} printed:\n{done.stdout[-3000:]}"
    print(done.stdout[-3000:])
