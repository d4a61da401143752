"""The record the default world writes about itself: its exact ground truth."""

from __future__ import annotations

from typing import Any

from skilleval.storage.records import Record


class GroundTruth(Record):
    """Expected reward of the sim policy per split and checkpoint, and each chunk's effect."""

    kind = "ground_truth"
    splits: dict[str, Any]
    temperature: float
    note: str
    provenance: dict[str, Any]
