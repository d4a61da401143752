"""Snakemake's SLURM executor at the ablation plan's scale (issue 63): the 216 trainer runs
of config/ablation/matrix.yaml, one job each, submitted through profiles/slurm to the
three-node test cluster (tests/engine_slurm_nodes.py), against the same plan run here.

Each run is the command trainer over a stand-in checkout whose train.py writes what a
trainer leaves, in milliseconds (tests/test_ablation.py): what is timed is the engine, i.e.
submission, scheduling, the Snakemake each job starts, and status checks.

Prints, here (-j cores) and on the cluster (one sbatch per run, profiles/slurm as shipped
but for the test cluster's partition and account): wall, jobs per minute, a job's seconds
and its trainer's share of them, CPU seconds on this host per job (Snakemake and what it
starts here); on the cluster also the queue depth squeue showed, sampled twice a second.

SKILLEVAL_BENCH_SIZE=tiny: 8 runs. SKILLEVAL_BENCH_CLUSTER=running uses the cluster that
is up (tests/test_slurm.py hands over its session's); otherwise the benchmark starts one
and stops it (root and .ci/install-engines, as for the tests). Asserts nothing.
"""

from __future__ import annotations

import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
os.chdir(REPO)  # tests.test_ablation reads the matrix by its path in the repository
sys.path.insert(0, str(REPO))

from skilleval.ablation.matrix import load_matrix  # noqa: E402
from skilleval.ablation.plan import PlannedRun, plan  # noqa: E402
from skilleval.provenance.durations import last_wall_s  # noqa: E402
from tests.conftest import copy_workflow, load_default_config  # noqa: E402
from tests.engine_slurm_nodes import NodesCluster, missing_engine  # noqa: E402
from tests.test_ablation import stand_in_checkout  # noqa: E402
from tests.test_slurm import site_profile  # noqa: E402

TINY = os.environ.get("SKILLEVAL_BENCH_SIZE") == "tiny"
TINY_RUNS = 8


@dataclass
class Build:
    """One build of the plan: what it took and what each of its jobs took."""

    wall_s: float
    cpu_s: float
    job_s: list[float]
    trainer_s: list[float]
    queue: list[tuple[int, int]] = field(default_factory=list)  # (pending, running)
    job_cpu_s: list[float] = field(default_factory=list)  # on its node (sacct TotalCPU)

    @property
    def outside_trainer_s(self) -> float:
        """A job's seconds that are not its trainer's: what the engine costs per job."""
        return statistics.median(self.job_s) - statistics.median(self.trainer_s)

    def line(self, name: str, jobs: int) -> str:
        job, trainer = statistics.median(self.job_s), statistics.median(self.trainer_s)
        return (
            f"{name:<20} wall {self.wall_s:7.1f} s, {jobs / self.wall_s * 60:6.1f} jobs per "
            f"minute; a job {job:5.2f} s (median of {len(self.job_s)}), its trainer "
            f"{trainer:5.3f} s; CPU on this host {self.cpu_s / jobs:5.2f} s per job"
        )


def committed(checkout: Path) -> None:
    """The command trainer identifies its code by a git commit."""
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    subprocess.run(["git", "init", "-q"], cwd=checkout, check=True)
    subprocess.run(["git", "add", "-A"], cwd=checkout, check=True)
    subprocess.run([*git, "commit", "-qm", "stand-in trainer"], cwd=checkout, check=True)


def plan_workflow(root: Path, checkout: Path) -> tuple[Path, list[PlannedRun]]:
    """A copy of the workflow whose matrix runs the command trainer in ``checkout``."""
    root.mkdir()
    workdir = copy_workflow(root)
    matrix_file = workdir / "config" / "ablation" / "matrix.yaml"
    matrix = yaml.safe_load(matrix_file.read_text())
    matrix["trainer"].update(kind="command", python=sys.executable, root=str(checkout))
    matrix_file.write_text(yaml.safe_dump(matrix, sort_keys=False))
    runs = plan(load_matrix(str(matrix_file)))
    if TINY:  # a spread over the plan's benchmarks and groups
        runs = runs[:: len(runs) // TINY_RUNS][:TINY_RUNS]
    backends = {**load_default_config()["backends"], "jobs_run_on": "cluster_nodes"}
    site_profile(workdir, backends)
    return workdir, runs


def trainer_seconds(workdir: Path, runs: list[PlannedRun]) -> list[float]:
    walls = [last_wall_s(workdir / run.summary_path) for run in runs]
    missing = [run.run_id for run, wall in zip(runs, walls, strict=True) if wall is None]
    if missing:
        raise SystemExit(f"no summary for {missing[:5]} in {workdir}")
    return [wall for wall in walls if wall is not None]


def snakemake(workdir: Path, runs: list[PlannedRun], *options: str) -> tuple[float, float, str]:
    """Wall and CPU seconds (this process's children: Snakemake and what it starts here)."""
    targets = [run.summary_path for run in runs]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", *options, *targets],
        cwd=workdir,
        capture_output=True,
        text=True,
    )
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"snakemake {' '.join(options)} failed:\n{done.stderr[-4000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout + done.stderr


def built_here(root: Path, checkout: Path) -> tuple[Build, float]:
    """The plan built on this host, and how long Snakemake takes to parse it."""
    workdir, runs = plan_workflow(root, checkout)
    parse_s, _, _ = snakemake(workdir, runs[:1], "-n")
    cores = str(os.cpu_count() or 1)
    wall, cpu, output = snakemake(workdir, runs, "-j", cores)
    took = [float(s) for s in re.findall(r"ablation_run \S+ \S+ took ([\d.]+) s", output)]
    return Build(wall, cpu, took, trainer_seconds(workdir, runs)), parse_s


class QueueDepth(threading.Thread):
    """squeue's pending and running jobs, twice a second, until stopped."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[tuple[int, int]] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(0.5):
            out = subprocess.run(["squeue", "-h", "-o", "%T"], capture_output=True, text=True)
            states = out.stdout.split()
            self.samples.append((states.count("PENDING"), states.count("RUNNING")))


def clock_seconds(clock: str) -> float:
    """sacct's [days-][hours:]minutes:seconds as seconds."""
    days, _, rest = clock.rpartition("-")
    parts = [float(part) for part in rest.split(":")]
    return int(days or 0) * 86400 + sum(p * 60.0**i for i, p in enumerate(reversed(parts)))


def sacct_seconds(since: set[str]) -> tuple[list[float], list[float]]:
    """Elapsed and CPU seconds of each job completed since ``since`` was read. Without -X:
    sacct sums a job's CPU from its steps' records, which -X leaves out."""
    out = subprocess.run(
        ["sacct", "-P", "-n", "-o", "JobID,ElapsedRaw,TotalCPU,State"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = [line.split("|") for line in out.splitlines()]
    done = [(float(wall), clock_seconds(cpu)) for job, wall, cpu, state in rows
            if "." not in job and job not in since and state == "COMPLETED"]  # fmt: skip
    return [wall for wall, _ in done], [cpu for _, cpu in done]


def job_ids() -> set[str]:
    out = subprocess.run(["sacct", "-X", "-P", "-n", "-o", "JobID"], capture_output=True, text=True)
    return set(out.stdout.split())


def built_on_cluster(root: Path, checkout: Path, *options: str) -> Build:
    workdir, runs = plan_workflow(root, checkout)
    before = job_ids()
    depth = QueueDepth()
    depth.start()
    try:
        wall, cpu, _ = snakemake(workdir, runs, "--profile", "profiles/site", *options)
    finally:
        depth.stopped.set()
        depth.join()
    elapsed: list[float] = []
    job_cpu: list[float] = []
    # slurmdbd records a job's end, and then its steps' CPU, a moment after it ends.
    deadline = time.monotonic() + 60
    while (len(elapsed) < len(runs) or not all(job_cpu)) and time.monotonic() < deadline:
        elapsed, job_cpu = sacct_seconds(before)
        time.sleep(1)
    return Build(wall, cpu, elapsed, trainer_seconds(workdir, runs), depth.samples, job_cpu)


def queue_line(build: Build) -> str:
    pending = [p for p, _ in build.queue] or [0]
    running = [r for _, r in build.queue] or [0]
    return (
        f"{'':<20} queue depth: at most {max(pending)} pending and {max(running)} running, "
        f"on average {statistics.fmean(pending):.1f} pending and "
        f"{statistics.fmean(running):.1f} running ({len(build.queue)} samples)"
    )


def cpu_line(build: Build) -> str:
    # A job whose CPU sacct has not recorded (no job accounting) is left out, not a zero.
    recorded = [cpu for cpu in build.job_cpu_s if cpu > 0]
    cpu = (
        f"{statistics.median(recorded):.2f} s (median of {len(recorded)})"
        if recorded
        else "not recorded (the cluster gathers no job accounting)"
    )
    return (
        f"{'':<20} CPU of a job on its node (sacct TotalCPU, its Snakemake job step and "
        f"trainer): {cpu}; the nodes share this host's {os.cpu_count()} cores, so a job's "
        "wall also counts its wait for one"
    )


def main() -> None:
    running = os.environ.get("SKILLEVAL_BENCH_CLUSTER") == "running"
    reason = None if running else missing_engine()
    if reason:
        raise SystemExit(f"no test cluster: {reason}")
    root = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    checkout = root / "trainer"
    matrix = load_matrix(str(REPO / "config" / "ablation" / "matrix.yaml"))
    stand_in_checkout(checkout, matrix, plan(matrix))
    committed(checkout)
    here, parse_s = built_here(root / "here", checkout)
    jobs = len(here.trainer_s)
    print(f"ablation plan: {jobs} runs, one job each, command trainer (stand-in checkout)")
    print(f"parsing the workflow (snakemake -n; a cluster job parses it twice): {parse_s:.1f} s")
    print(here.line(f"here (-j {os.cpu_count()})", jobs), flush=True)
    cluster = None if running else NodesCluster(root / "slurm").start()
    try:
        there = built_on_cluster(root / "cluster", checkout)
    finally:
        if cluster is not None:
            cluster.stop()
    print(there.line("on 3 nodes", jobs))
    print(queue_line(there))
    print(cpu_line(there))
    print(
        "Snakemake's own overhead per job (its seconds outside the trainer): "
        f"here {here.outside_trainer_s:.2f} s, on the cluster {there.outside_trainer_s:.2f} s"
    )
    print(f"ratio of walls, cluster / here: {there.wall_s / here.wall_s:.2f}")


if __name__ == "__main__":
    main()
