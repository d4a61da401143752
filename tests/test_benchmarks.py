"""Every script under benchmarks/ runs at its tiny size (SKILLEVAL_BENCH_SIZE=tiny), so
none can rot unseen: a crash or a figure line it no longer prints fails here. The figures
themselves are for people and are not judged."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# What each benchmark prints when it gets to its figures; a new script needs a line here.
PRINTS = {
    "bench_bootstrap.py": "5 contrasts x 200 resamples x 40 tasks",
    "bench_checkpoint_diff.py": "cpu: peak RSS",
    "bench_coverage_study.py": "mean over quantities, BCa:",
    "bench_dry_run.py": "ratio:",
    "bench_eval_graph.py": "no-op 'snakemake -n paper'",
    "bench_gpu_phase.py": "GPU 0 leased: False",
    "bench_http_throughput.py": "results identical task by task: True",
}
SCRIPTS = sorted(p.name for p in (REPO / "benchmarks").glob("*.py"))


def test_every_benchmark_is_listed() -> None:
    assert sorted(PRINTS) == SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS)
def test_benchmark_runs_tiny(script: str, tmp_path: Path) -> None:
    env = {**os.environ, "SKILLEVAL_BENCH_SIZE": "tiny", "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / script)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=500,
    )
    assert done.returncode == 0, f"{script} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert PRINTS[script] in done.stdout, f"{script} printed:\n{done.stdout[-3000:]}"
