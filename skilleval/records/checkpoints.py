"""The records checkpoint audits write."""

from __future__ import annotations

from typing import Any

from skilleval.storage.records import Check, Record


class CheckpointAudit(Record):
    """Shards present and readable, tensor counts and dtypes, and the content fingerprint."""

    kind = "checkpoint_audit"
    checkpoint_id: str
    weights: str
    resolved: str | None
    passed: bool
    checks: list[Check]
    problems: list[str]
    shards: list[str]
    shard_bytes: dict[str, int]
    missing_shards: list[str]
    tensor_count: int
    parameter_count: int
    dtypes: dict[str, int]
    fingerprint: str | None
    fingerprint_method: str
    provenance: dict[str, Any]


class WeightDiff(Record):
    """Per-tensor change from one checkpoint to another, and the tensors only one holds."""

    kind = "weight_diff"
    base: str
    final: str
    device: str
    accumulator: str
    tensors: list[dict[str, Any]]
    only_in_base: list[str]
    only_in_final: list[str]
    checkpoints: list[str]
    provenance: dict[str, Any]
