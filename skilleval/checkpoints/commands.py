"""``skilleval checkpoint``: audit a checkpoint, or diff two, before registering them."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def cmd_checkpoint_audit(args: argparse.Namespace) -> int:
    from skilleval.checkpoints.audit import audit_checkpoint, render_audit

    audit = audit_checkpoint(Path(args.path).name, args.path, args.full_hash)
    print(json.dumps(audit, indent=2) if args.json else render_audit(audit))
    return 0 if audit["passed"] else 1


def cmd_checkpoint_diff(args: argparse.Namespace) -> int:
    from skilleval.checkpoints.diff import render_diff, weight_diff

    diff = weight_diff(args.base, args.final, args.device)
    print(json.dumps(diff, indent=2) if args.json else render_diff(diff, args.top))
    return 0


def add_checkpoint_command(sub: Any) -> None:
    checkpoint = sub.add_parser("checkpoint", help="check checkpoints before registering them")
    checkpoint_sub = checkpoint.add_subparsers(dest="checkpoint_command", required=True)
    audit = checkpoint_sub.add_parser(
        "audit", help="shards present and readable, index true to its shards; exit 1 if not"
    )
    audit.add_argument("path", help="checkpoint directory, its index file or one .safetensors")
    audit.add_argument("--full-hash", action="store_true", help="hash every byte (slow)")
    audit.add_argument("--json", action="store_true", help="print the audit record as JSON")
    audit.set_defaults(func=cmd_checkpoint_audit)
    diff = checkpoint_sub.add_parser("diff", help="relative L2 change per tensor, FINAL vs BASE")
    diff.add_argument("base", help="checkpoint directory, index file or .safetensors")
    diff.add_argument("final", help="checkpoint directory, index file or .safetensors")
    diff.add_argument("--json", action="store_true", help="print every tensor as JSON")
    diff.add_argument("--top", type=int, default=20, help="tensors listed")
    diff.add_argument(
        "--device",
        choices=["auto", "cpu", "cuda"],
        default="auto",
        help="where sums are taken",
    )
    diff.set_defaults(func=cmd_checkpoint_diff)
