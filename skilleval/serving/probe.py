"""A GPU job for checking leases: what the job sees, on which physical card, when.

Holds a real CUDA allocation for a few seconds when torch and a GPU are present, and
records CUDA_VISIBLE_DEVICES, torch's device count and the physical cards' UUIDs.
torch is imported lazily: on machines without it the probe still records the lease.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any


def query_gpus(field: str) -> dict[str, str] | None:
    """Host card index -> one nvidia-smi field (uuid, memory.used, ...); None without GPUs."""
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu=index,{field}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return dict(line.split(", ", 1) for line in out.strip().splitlines())


def physical_uuids(visible: str) -> list[str]:
    """UUIDs of the cards behind CUDA_VISIBLE_DEVICES (host indices)."""
    by_index = query_gpus("uuid") or {}
    return [by_index.get(i.strip(), "?") for i in visible.split(",") if i.strip()]


def probe(hold_s: float, megabytes: int) -> dict[str, Any]:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    record: dict[str, Any] = {
        "CUDA_VISIBLE_DEVICES": visible,
        "start": time.time(),
        "uuids": physical_uuids(visible),
        "device_count": None,
    }
    record.update(_hold_cards(hold_s, megabytes))
    record["end"] = time.time()
    return record


def _hold_cards(hold_s: float, megabytes: int) -> dict[str, Any]:
    """Allocate on every visible card for hold_s (just wait when torch sees no GPU)."""
    try:
        import torch
    except ImportError:
        time.sleep(hold_s)
        return {}
    if not torch.cuda.is_available():
        time.sleep(hold_s)
        return {}
    blocks = [
        torch.empty(megabytes * 2**20, dtype=torch.uint8, device=f"cuda:{i}")
        for i in range(torch.cuda.device_count())
    ]
    torch.cuda.synchronize()
    time.sleep(hold_s)
    del blocks
    return {"device_count": torch.cuda.device_count(), "allocated_mb_per_device": megabytes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hold", type=float, default=2.0)
    parser.add_argument("--megabytes", type=int, default=1024)
    parser.add_argument("--output", required=True)
    args = parser.parse_args()
    with open(args.output, "w") as handle:
        json.dump(probe(args.hold, args.megabytes), handle)
    sys.exit(0)


if __name__ == "__main__":
    main()
