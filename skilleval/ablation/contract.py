"""What the audit reads of a trainer's out_root, declared once: the trainer contract.

A command trainer is launched as ``python SCRIPT --config CONFIG key=value ...
env.out_root=OUT_ROOT`` (ablation.trainer.trainer_command) and must leave in its out_root
a results file with the scores, its effective config and a log whose head says its train
size, batch sizes and start. Which files and which log lines those are is declared here,
with the seed trainer's defaults, and a lab points them at its own trainer under
``trainer.contract`` of the matrix. ``skilleval trainer check OUT_ROOT`` reads one finished
out_root through the contract and says which audit checks it can and cannot compute.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from skilleval.config.matrix import Matrix

# The seed trainer's log head (memo 003 §0): model, split, reasoning effort, train size,
# batch sizes, as plain key=value lines. Not train.train_size=0 of a config dump: that is
# the setting (0: infer), not the size.
SEED_LOG_LINES = {
    "train_size": r"(?<![.\w])(?:train_size|train)\s*[=:]\s*(\d+)",
    "batch_sizes": r"\bbatch_sizes\s*[=:]\s*\[([0-9,\s]*)\]",
    "start": r"^\[start\]\s*(\S+)|\bstart(?:ed)?(?:_at)?\s*[=:]\s*(\d{4}-\S+)",
}
# Where a built run keeps the trainer's results file (the run's own summary.json takes the
# out_root's summary.json name).
KEPT_RESULTS_FILE = "trainer_summary.json"
# The scores every table needs, from the trainer's results file.
SCORE_KEYS = ("best_selection_score", "base_score", "best_test_score")


@dataclass(frozen=True)
class TrainerContract:
    """Where the audit finds what it reads; every field has the seed trainer's default."""

    results_file: str = "summary.json"
    config_file: str = "config.json"
    log_files: tuple[str, ...] = ("train.log",)
    log_head_lines: int = 50
    log_lines: Mapping[str, str] = field(default_factory=lambda: dict(SEED_LOG_LINES))
    # The audit's name of a config key -> the lab trainer's own name for it.
    config_keys: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, matrix: Matrix) -> TrainerContract:
        """The matrix's trainer contract: its ``trainer.contract`` over the defaults."""
        declared = matrix.trainer.contract.settings()
        known = {f.name for f in fields(cls)}
        values: dict[str, Any] = {k: v for k, v in declared.items() if k in known}
        if "log_files" in values:
            values["log_files"] = tuple(values["log_files"])
        values["log_lines"] = {**SEED_LOG_LINES, **declared.get("log_lines", {})}
        values["config_keys"] = dict(declared.get("config_keys") or {})
        return cls(**values)

    def audit_keys(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The trainer's flattened config under the audit's key names (config_keys)."""
        renamed = dict(config)
        for audit_key, own_key in self.config_keys.items():
            if own_key in renamed:
                renamed[audit_key] = renamed.pop(own_key)
        return renamed

    def pattern(self, line: str) -> re.Pattern[str]:
        return re.compile(self.log_lines[line])
