"""``skilleval gpu-run``: a command on leased cards of the host, never a protected one."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from skilleval.errors import SkillevalError
from skilleval.serving.gpu import lock_directory


def cmd_gpu_run(args: argparse.Namespace) -> int:
    """Lease cards, export CUDA_VISIBLE_DEVICES, run the command, release on exit."""
    import subprocess
    import time

    from skilleval.serving.gpu import gpu_lease, parse_devices, visible_devices

    command = args.command_args[1:] if args.command_args[:1] == ["--"] else args.command_args
    if not command:
        raise SkillevalError("gpu-run needs a command after --")
    allowed = parse_devices(args.devices)
    protected = parse_devices(args.protected)
    with gpu_lease(args.gpus, allowed, args.lock_dir, args.timeout, protected=protected) as lease:
        record = {**lease.as_json(), "command": command, "pid": os.getpid()}
        sys.stderr.write(f"skilleval gpu-run: leased {record}\n")
        with visible_devices(lease):
            started = time.time()
            code = subprocess.call(command)
        if args.record:
            from skilleval.serving.gpu import LeaseRecord

            LeaseRecord.create(**record, started=started, ended=time.time(), returncode=code).write(
                args.record
            )
    return code


def add_gpu_command(sub: Any) -> None:
    gpu = sub.add_parser("gpu-run", help="run a command on leased GPUs (never a protected one)")
    gpu.add_argument("--gpus", type=int, required=True, help="cards to lease")
    gpu.add_argument(
        "--devices",
        default=os.environ.get("SKILLEVAL_GPU_DEVICES", ""),
        help="allowed card ids, e.g. 1-13 (profile resource gpu_devices)",
    )
    gpu.add_argument("--protected", default="0", help="cards never handed out")
    gpu.add_argument(
        "--lock-dir",
        default=str(lock_directory()),
        help="folder of the card locks, shared by every job of the host",
    )
    gpu.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for cards")
    gpu.add_argument("--record", help="write the lease and timings to this JSON file")
    gpu.add_argument("command_args", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    gpu.set_defaults(func=cmd_gpu_run)
