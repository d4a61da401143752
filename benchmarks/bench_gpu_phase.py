"""The paper's GPU phase on a simulated 14-card host (issue 27): makespan against card-bound.

A fake nvidia-smi lists 14 cards, a lock directory of the benchmark's own holds the leases
(GPU 0 is never leasable), and each model run launches the project's stand-in server in
sglang's place with a start-up delay and a per-reply latency. One environment server serves
every run (as the lab's does), so the stand-ins serve the model only. The paper's 20 model
runs (4 main, the bare val run, 12 masked, 3 ranking arms) are built under
profiles/gpu-host on the small world.

From the run logs: each run's card interval (its lease to its server's stop), so

    makespan   = last release - first lease
    card-bound = card-seconds of all runs / 13, at 4-card granularity: 3 servers of 4 cards
                 fit on 13 cards, so sum(run seconds) / 3

Prints ``makespan M s, card-bound B s, ratio R.RRx``, checks that GPU 0 was never leased
and that no two live servers shared a card or a port, and draws the card occupancy over
time (PNG path printed). Asserts nothing about the ratio.

    python benchmarks/bench_gpu_phase.py [startup_delay_s=8] [latency_s=0.2] [out_dir]

SKILLEVAL_BENCH_SIZE=tiny: the four main runs only, no start-up delay and no reply latency.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

from tests.conftest import copy_workflow, stand_in_server  # noqa: E402
from tests.engine_slurm import free_port  # noqa: E402
from tests.test_gpu_host import host_workflow, intervals, overlaps  # noqa: E402
from tests.test_owned_servers import write_nvidia_smi  # noqa: E402

CARDS, PER_SERVER = 13, 4
MAIN_RUNS = [
    f"results/runs/{r}/summary.json" for r in ("base-free", "base-S0", "final-free", "final-ST")
]


def draw(runs: list[tuple[str, float, float, list[int], int]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    start = min(r[1] for r in runs)
    fig, (ax, bx) = plt.subplots(2, 1, figsize=(8, 6), sharex=True, layout="constrained")
    for run, t0, t1, cards, _ in runs:
        for card in cards:
            ax.broken_barh([(t0 - start, t1 - t0)], (card - 0.4, 0.8))
        ax.text(t0 - start, max(cards) + 0.45, run, fontsize=5)
    ax.set_yticks(range(14))
    ax.set_ylabel("card")
    ax.set_title("card occupancy of the paper's model runs (GPU 0 never leased)")
    events = sorted(
        [(r[1] - start, len(r[3])) for r in runs] + [(r[2] - start, -len(r[3])) for r in runs]
    )
    times, busy, level = [0.0], [0], 0
    for t, change in events:
        level += change
        times.append(t)
        busy.append(level)
    bx.step(times, busy, where="post")
    bx.axhline(CARDS, linestyle=":", color="grey")
    bx.set_ylabel("cards in use")
    bx.set_xlabel("seconds since the first lease")
    fig.savefig(out, dpi=150)


def main() -> None:
    tiny = os.environ.get("SKILLEVAL_BENCH_SIZE") == "tiny"
    delay = float(sys.argv[1]) if len(sys.argv) > 1 else (0.0 if tiny else 8.0)
    latency = float(sys.argv[2]) if len(sys.argv) > 2 else (0.0 if tiny else 0.2)
    out_dir = Path(sys.argv[3]) if len(sys.argv) > 3 else Path(tempfile.mkdtemp())
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "workflow").mkdir()
        workdir = copy_workflow(Path(tmp) / "workflow")
        config = host_workflow(workdir)
        protocol = config["protocols"]["local-sglang"]
        env_port = free_port()
        world = workdir / "results" / "world"
        # One environment server for every run; each stand-in serves the model only (its
        # own environment on a free port nobody calls).
        execution = protocol["execution"]
        execution["environment"].update(url=f"http://127.0.0.1:{env_port}", beside_run=False)
        execution["model_server"]["launch"]["command"] = stand_in_server(
            world, 0, "--latency", str(latency), "--startup-delay", str(delay)
        )
        (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        bin_dir = Path(tmp) / "bin"
        bin_dir.mkdir()
        write_nvidia_smi(bin_dir, 14)
        lock_dir = Path("/tmp") / f"skilleval-bench-locks-{uuid.uuid4().hex[:8]}"
        path = f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}"
        env = {**os.environ, "PATH": path,
               "SKILLEVAL_GPU_LOCK_DIR": str(lock_dir)}  # fmt: skip
        snakemake = [sys.executable, "-m", "snakemake", "--directory", str(workdir)]
        subprocess.run([*snakemake, "-j2", "results/world/ground_truth.json"], cwd=workdir,
                       env=env, check=True, capture_output=True)  # fmt: skip
        env_server = subprocess.Popen(
            [sys.executable, "-m", "skilleval.cli", "serve-world", "--world-dir", str(world),
             "--model-path", str(world / "checkpoints" / "base" / "model.safetensors"),
             "--port", str(free_port()), "--env-port", str(env_port)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        time.sleep(3)
        try:
            started = time.monotonic()
            done = subprocess.run(
                [*snakemake, "--profile", "profiles/gpu-host", "-j", "32",
                 *(MAIN_RUNS if tiny else ["paper"])],
                cwd=workdir, env=env, capture_output=True, text=True,
            )  # fmt: skip
            wall = time.monotonic() - started
        finally:
            env_server.terminate()
            subprocess.run(["rm", "-rf", str(lock_dir)], check=False)
        if done.returncode != 0:
            sys.exit(done.stderr[-4000:])
        runs = intervals(workdir)
        makespan = max(r[2] for r in runs) - min(r[1] for r in runs)
        run_seconds = sum(r[2] - r[1] for r in runs)
        bound = run_seconds * PER_SERVER / ((CARDS // PER_SERVER) * PER_SERVER)
        print(
            f"{len(runs)} model runs (start-up {delay:g} s, {latency:g} s a reply), "
            f"build {wall:.0f} s"
        )
        print(f"makespan {makespan:.1f} s, card-bound {bound:.1f} s, ratio {makespan / bound:.2f}x")
        print(f"card-seconds / 13 (no granularity): {run_seconds * PER_SERVER / CARDS:.1f} s")
        print(f"GPU 0 leased: {any(0 in r[3] for r in runs)}; "
              f"live servers sharing a card or port: {overlaps(runs) or 'none'}")  # fmt: skip
        figure = out_dir / "gpu_phase_occupancy.png"
        draw(runs, figure)
        print(f"figure: {figure}")


if __name__ == "__main__":
    main()
