"""The records a run writes: one per task (results.jsonl) and its summary (summary.json)."""

from __future__ import annotations

import re
from typing import Any, Self

from pydantic import ConfigDict, model_validator

from skilleval.storage.records import Record

METRIC_NAME = re.compile(r"^(reward|r_\w+)$")


class WithMetrics(Record):
    """A record that also holds ``reward`` and every ``r_*`` metric as top-level floats."""

    model_config = ConfigDict(frozen=True, extra="allow")

    @model_validator(mode="after")
    def only_metrics_extra(self) -> Self:
        for name, value in (self.model_extra or {}).items():
            if not METRIC_NAME.match(name) or not isinstance(value, int | float):
                raise ValueError(f"unknown field {name!r} (only reward and r_* metrics)")
        return self

    def metric(self, name: str) -> float:
        value = (self.model_extra or {}).get(name)
        if value is None:
            raise KeyError(f"{self.kind} record has no metric {name!r}")
        return float(value)


class TaskRecord(WithMetrics):
    kind = "task_record"
    task_id: str
    repeat: int
    steps: int
    prompt_tokens: int
    completion_tokens: int
    tokens: int
    stop_reason: str
    error: str | None
    # Written since re-sent requests were counted; a record before that re-sent none known.
    resent_after_timeout: int = 0
    # What answered the episode (runs.answered): the server's identity digest and words,
    # and the models its replies named; None in a record written before it was stamped.
    answered: dict[str, Any] | None = None


class RunSummary(WithMetrics):
    kind = "run_summary"
    run: str
    experiment: str
    protocol: str
    protocol_fingerprint: str
    checkpoint_id: str
    checkpoint_fingerprint: str
    bank: str | None
    bank_hash: str | None
    split: str
    split_hash: str
    prompt_hash: str
    prompt_files: dict[str, str]
    backends: dict[str, str]
    sim_policy_version: int | None
    mask_hash: str | None = None
    code_fingerprint: str
    fingerprint: str
    protocol_values: dict[str, Any]
    chunk_hashes: dict[str, str]
    repeats: int
    n_records: int
    n_tasks: int
    coverage: float
    metrics: list[str]
    tokens: dict[str, int | float]
    steps_mean: float
    stop_reasons: dict[str, int]
    task_errors: int
    # Model requests re-sent after the client's timeout: requests, and episodes with any;
    # None in a summary written before they were counted, which a verdict's check fails.
    resent_after_timeout: dict[str, int] | None = None
    service: dict[str, Any]
    # What answered the run (Service.simulation); None in a summary written before it
    # was recorded, which the notice names as unknown.
    simulated: dict[str, Any] | None = None
    execution: dict[str, Any]
    provenance: dict[str, Any]

    @property
    def protocol_label(self) -> str:
        """The protocol's name with its values' digest: two protocols of one name but other
        values never read as one in a table."""
        return f"{self.protocol}@{self.protocol_fingerprint[:12]}"

    @property
    def service_unchanged(self) -> bool:
        return bool(self.service.get("unchanged"))
