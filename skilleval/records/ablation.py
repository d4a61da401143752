"""The records of one ablation run: its summary and its parameter audit."""

from __future__ import annotations

from typing import Any

from skilleval.storage.records import Check, Record


class AblationSummary(Record):
    kind = "ablation_summary"
    run_id: str
    id: str
    section: str
    benchmark: str
    group: str
    value: str
    overrides: dict[str, Any]
    harness: dict[str, Any] | None
    setting: dict[str, Any]
    best_selection_score: float
    base_score: float
    best_test_score: float
    delta: float
    tokens: int | None
    steps: int | None
    steps_per_epoch: int | None
    batch_sizes: list[int] | None
    train_size: int | None
    empty_response_fraction: float | None
    trainer: str
    # Which trainer built the run, for the simulation notice; None before it was recorded.
    simulated: dict[str, Any] | None = None
    single_writer: bool
    plan_fingerprint: str
    provenance: dict[str, Any]


class AblationAudit(Record):
    kind = "ablation_audit"
    run_id: str
    valid: bool
    reasons: list[str]
    checks: list[Check]
