"""Run the GPU-lease probe on this host and print what it shows (issue 8).

With N cards and GPU 0 protected: JOBS one-card jobs plus one two-card job through
``snakemake -j`` with ``--resources gpu=N-1``, sampling nvidia-smi memory per card
meanwhile; then a job asking for N cards, which must be refused at parse time. Works
without GPUs too (``--fake-gpus N``): the leases are then checked, not CUDA.

Usage: python benchmarks/gpu_leases/run.py [--jobs 40] [--hold 3] [--fake-gpus 14] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from skilleval.serving.probe import query_gpus

HERE = Path(__file__).resolve().parent


def gpu_count() -> int:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return 0
    return len(out.stdout.strip().splitlines())


def sample_memory(stop: threading.Event, samples: list[dict[str, float]]) -> None:
    while not stop.is_set():
        used = query_gpus("memory.used")
        if used is None:
            return
        samples.append({"t": time.time(), **{i: float(v) for i, v in used.items()}})
        stop.wait(0.5)


def overlaps(intervals: list[tuple[float, float, str]]) -> int:
    count = 0
    ordered = sorted(intervals)
    for i, (_, end, _) in enumerate(ordered):
        count += sum(1 for s, _, _ in ordered[i + 1 :] if s < end)
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--hold", type=float, default=3.0)
    parser.add_argument("--fake-gpus", type=int, default=0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    n = args.fake_gpus or gpu_count()
    if n < 2:
        sys.exit(f"need a host with >= 2 GPUs (found {n}); use --fake-gpus N to check leases")
    jobs = args.jobs or 3 * (n - 1)
    out = Path(args.out or tempfile.mkdtemp(prefix="gpu-leases-"))
    base = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(HERE / "Snakefile"),
        "-d",
        str(out),
        "--resources",
        f"gpu={n - 1}",
        "--default-resources",
        f"gpu_devices='1-{n - 1}'",
    ]
    samples: list[dict[str, float]] = []
    stop = threading.Event()
    sampler = threading.Thread(target=sample_memory, args=(stop, samples), daemon=True)
    idle = {}
    if not args.fake_gpus:
        sampler.start()
        time.sleep(1.0)
        idle = dict(samples[0]) if samples else {}
    start = time.time()
    done = subprocess.run(
        [
            *base,
            "-j",
            str(jobs + 1),
            "--config",
            f"jobs={jobs}",
            f"hold_s={args.hold}",
            "wide_gpus=2",
        ],
        capture_output=True,
        text=True,
    )
    elapsed = time.time() - start
    stop.set()
    if done.returncode != 0:
        sys.exit(f"probe workflow failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    refused = subprocess.run(
        [*base, "-n", "--config", f"too_many_gpus={n}"], capture_output=True, text=True
    )
    records = []
    for path in sorted((out / "probe").glob("*.json")):
        lease = json.loads(Path(f"{path}.lease").read_text())
        seen = json.loads(path.read_text())
        records.append({"job": path.stem, "lease": lease, "seen": seen})
    by_card: dict[str, list[tuple[float, float, str]]] = {}
    for r in records:
        cards = r["seen"]["uuids"] or [f"id{d}" for d in r["lease"]["devices"]]
        for card in cards:
            by_card.setdefault(card, []).append(
                (r["lease"]["started"], r["lease"]["ended"], r["job"])
            )
    overlap = sum(overlaps(v) for v in by_card.values())
    saw_zero = [r["job"] for r in records if 0 in r["lease"]["devices"]]
    wrong_count = [
        r["job"]
        for r in records
        if r["seen"]["device_count"] not in (None, len(r["lease"]["devices"]))
    ]
    wide = next(r for r in records if r["job"] == "wide")
    peak0 = max((s.get("0", 0.0) for s in samples), default=float("nan"))
    print(f"host cards: {n} ({'fake' if args.fake_gpus else 'real'}), GPU 0 protected")
    print(
        f"jobs: {len(records)} ({jobs} x 1 card + 1 x 2 cards) in {elapsed:.1f}s; "
        f"distinct cards used: {len(by_card)}"
    )
    print(f"overlapping holds of one card: {overlap}; jobs that got GPU 0: {len(saw_zero)}")
    print(
        f"jobs whose torch device count != cards leased: {len(wrong_count)}; "
        f"two-card job saw {wide['seen']['device_count']} device(s) on {wide['lease']['devices']}"
    )
    print(
        f"GPU 0 memory: idle {idle.get('0', float('nan'))} MiB, peak during run {peak0} MiB "
        f"({len(samples)} samples)"
    )
    message = (refused.stdout + refused.stderr).strip().splitlines()
    print(
        f"job asking for {n} cards: exit {refused.returncode}: "
        f"{next((m for m in message if 'asks for' in m), message[-1:])}"
    )
    print(f"records under {out}")


if __name__ == "__main__":
    main()
