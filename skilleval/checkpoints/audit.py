"""Checkpoint audits: every shard present and readable, the index true to its shards, what
the checkpoint holds (dtypes, parameters, shard sizes) and its fingerprint.

Only headers are read, so an audit of a many-GB checkpoint takes milliseconds, apart
from the fingerprint (sampled blocks unless a full hash is asked for).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skilleval.checkpoints.files import checkpoint_fingerprint, file_fingerprint
from skilleval.checkpoints.layout import (
    TensorEntry,
    is_index,
    read_header,
    read_index,
    resolve_weights,
)
from skilleval.errors import CheckpointError
from skilleval.records.checkpoints import CheckpointAudit
from skilleval.records.provenance import provenance
from skilleval.storage.records import Check


@dataclass
class CheckpointScan:
    """What the headers of a checkpoint's shards say, and what is wrong with them."""

    weights: Path | None = None
    shards: list[str] = field(default_factory=list)
    shard_bytes: dict[str, int] = field(default_factory=dict)
    headers: dict[str, dict[str, TensorEntry]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    extra_shards: list[str] = field(default_factory=list)
    index_mismatches: list[str] = field(default_factory=list)

    @property
    def tensors(self) -> dict[str, tuple[str, TensorEntry]]:
        """Tensor name -> (the shard holding it, its entry), over the readable shards."""
        return {
            name: (shard, entry)
            for shard, entries in self.headers.items()
            for name, entry in entries.items()
        }

    @property
    def problems(self) -> list[str]:
        return [
            *(f"{name}: shard is missing" for name in self.missing),
            *self.unreadable,
            *self.index_mismatches,
            *(f"{name}: shard is not in the index" for name in self.extra_shards),
        ]

    def checks(self) -> list[Check]:
        return [
            Check(
                "all_shards_present",
                not self.missing,
                f"missing: {self.missing}" if self.missing else f"{len(self.shards)} shard(s)",
            ),
            Check(
                "all_shards_readable",
                not self.unreadable,
                "; ".join(self.unreadable) or "headers parse",
            ),
            Check(
                "index_matches_shards",
                not self.index_mismatches,
                "; ".join(self.index_mismatches) or "every tensor where the index says",
            ),
            Check(
                "no_extra_shards",
                not self.extra_shards,
                f"not in the index: {self.extra_shards}" if self.extra_shards else "none",
            ),
        ]


def scan_checkpoint(weights: str | Path) -> CheckpointScan:
    scan = CheckpointScan()
    try:
        scan.weights = resolve_weights(weights)
        index = read_index(scan.weights) if is_index(scan.weights) else None
    except CheckpointError as error:
        scan.unreadable.append(str(error))
        return scan
    if not scan.weights.exists():
        scan.missing.append(scan.weights.name)
        return scan
    scan.shards = sorted(set(index.values())) if index is not None else [scan.weights.name]
    for name in scan.shards:
        _scan_shard(scan, scan.weights.parent / name)
    if index is not None:
        _compare_index(scan, index, scan.weights.parent)
    return scan


def _scan_shard(scan: CheckpointScan, shard: Path) -> None:
    if not shard.exists():
        scan.missing.append(shard.name)
        return
    scan.shard_bytes[shard.name] = shard.stat().st_size
    try:
        scan.headers[shard.name] = read_header(shard)
    except (CheckpointError, OSError) as error:
        scan.unreadable.append(str(error))


def _compare_index(scan: CheckpointScan, index: dict[str, str], folder: Path) -> None:
    tensors = scan.tensors
    for tensor, shard_name in sorted(index.items()):
        if shard_name in scan.headers and tensor not in scan.headers[shard_name]:
            scan.index_mismatches.append(
                f"{tensor}: the index places it in {shard_name}, which does not hold it"
            )
    for tensor in sorted(set(tensors) - set(index)):
        scan.index_mismatches.append(
            f"{tensor}: held by {tensors[tensor][0]} but not listed in the index"
        )
    listed = set(scan.shards)
    scan.extra_shards = sorted(p.name for p in folder.glob("*.safetensors") if p.name not in listed)


def audit_checkpoint(checkpoint_id: str, weights: str, full_hash: bool = False) -> dict[str, Any]:
    scan = scan_checkpoint(weights)
    checks = scan.checks()
    passed = all(c.passed for c in checks)
    fingerprint = None
    if passed and scan.weights is not None:
        fingerprint = (
            "|".join(file_fingerprint(scan.weights.parent / n, full=True) for n in scan.shards)
            if full_hash
            else checkpoint_fingerprint(scan.weights)
        )
    entries = [entry for _, entry in scan.tensors.values()]
    return {
        "checkpoint_id": checkpoint_id,
        "weights": str(weights),
        "resolved": str(scan.weights) if scan.weights is not None else None,
        "passed": passed,
        "checks": [c.as_json() for c in checks],
        "problems": scan.problems,
        "shards": scan.shards,
        "shard_bytes": scan.shard_bytes,
        "missing_shards": scan.missing,
        "tensor_count": len(entries),
        "parameter_count": sum(e.elements for e in entries),
        "dtypes": dict(Counter(e.dtype for e in entries)),
        "fingerprint": fingerprint,
        "fingerprint_method": "full sha256" if full_hash else "header + sampled blocks",
    }


def write_audit(checkpoint_id: str, weights: str, output: str, full_hash: bool = False) -> None:
    audit = audit_checkpoint(checkpoint_id, weights, full_hash)
    CheckpointAudit.create(**audit, provenance=provenance()).write(output)


def render_audit(audit: dict[str, Any]) -> str:
    """One line of what the checkpoint holds, or one line per problem."""
    if not audit["passed"]:
        return "\n".join(f"{audit['weights']}: {problem}" for problem in audit["problems"])
    sizes = sum(audit["shard_bytes"].values())
    dtypes = ", ".join(f"{n} {d}" for d, n in sorted(audit["dtypes"].items()))
    return (
        f"{audit['resolved']}: passed; {len(audit['shards'])} shard(s), {sizes / 2**30:.2f} GiB, "
        f"{audit['tensor_count']} tensors ({dtypes}), {audit['parameter_count']:,} parameters, "
        f"fingerprint {audit['fingerprint']}"
    )
