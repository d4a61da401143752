"""On a GPU host: what a workflow job sees without a lease, and with one. Prints JSON figures.

Each case is a fresh Python process started with the environment a job would have:
* ``bare``: the host's environment as a shell has it (what jobs inherited before every job
  started from skilleval.serving.gpu.job_environment);
* ``job``: after job_environment, as every job of the workflow starts;
* ``leased``: a job's environment plus a one-card lease (gpu_lease + visible_devices).
In each it records torch's device count, the device the weight diff's ``auto`` would pick,
and the memory nvidia-smi shows in use on every card before and after the process touched
CUDA (an allocation of 64 MB wherever torch sees a card).

Usage: python benchmarks/gpu_leases/no_lease.py [--output FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from skilleval.serving.gpu import gpu_lease, job_environment, visible_devices  # noqa: E402
from skilleval.serving.probe import query_gpus  # noqa: E402

CHILD = """
import json, torch
from skilleval.checkpoints.diff import pick_device
count = torch.cuda.device_count()
device = pick_device("auto")
if count:
    block = torch.empty(64 * 2**20, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
memory = __import__("skilleval.serving.probe", fromlist=["query_gpus"]).query_gpus("memory.used")
print(json.dumps({"device_count": count, "auto_device": device, "memory_used_mib": memory}))
"""


def child(env: dict[str, str]) -> dict[str, Any]:
    env = {**env, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the probe process failed:\n{done.stderr}")
    record: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    record["CUDA_VISIBLE_DEVICES"] = env.get("CUDA_VISIBLE_DEVICES")
    record["CUDA_DEVICE_ORDER"] = env.get("CUDA_DEVICE_ORDER")
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output")
    args = parser.parse_args()
    inventory = query_gpus("uuid") or {}
    bare = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    job = dict(bare)
    job_environment(job)
    results: dict[str, Any] = {"cards": inventory, "before": query_gpus("memory.used")}
    results["bare"] = child(bare)
    results["job"] = child(job)
    allowed = sorted(int(i) for i in inventory)
    protected = [] if len(allowed) == 1 else [0]
    with (
        tempfile.TemporaryDirectory() as locks,
        gpu_lease(1, allowed, locks, protected=protected) as lease,
    ):
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(job)
        with visible_devices(lease):
            results["leased"] = child(dict(os.environ)) | {"lease": list(lease.devices)}
        os.environ.clear()
        os.environ.update(saved)
    text = json.dumps(results, indent=2)
    print(text)
    if args.output:
        Path(args.output).write_text(text)


if __name__ == "__main__":
    main()
