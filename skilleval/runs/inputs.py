"""Plain descriptions of what a run reads, shared by the workflow and the package.

Kept free of heavy imports: rules/common.smk imports it when the workflow is parsed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RunInputs:
    """Everything an evaluation run reads, resolved from config by the workflow."""

    run: str
    experiment: str
    protocol_name: str
    protocol: dict[str, Any]
    checkpoint_id: str
    checkpoint_path: str
    checkpoint_expected_fingerprint: str | None
    bank_name: str | None
    bank_path: str | None
    bank_chunks: int | None
    split_file: str
    split: str
    backends: dict[str, str]
    catalogue: str
    mask_path: str | None = None
    mask_run: str | None = None
