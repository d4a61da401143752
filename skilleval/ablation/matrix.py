"""The ablation matrix read from its file: parsed, validated against its schema, and every
rule of ablation.checks held, before anything is planned from it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skilleval.ablation.checks import check_matrix
from skilleval.config.loading import ConfigSources, read_mapping
from skilleval.config.schema import validate_against_schema


def load_matrix(path: str | Path = "config/ablation/matrix.yaml") -> dict[str, Any]:
    """The matrix, refused (file, line, key, fix) unless it parses and every rule holds."""
    loaded = read_mapping(path, "ablation matrix", "ablation.matrix")
    source = ConfigSources([loaded])
    validate_against_schema(loaded.data, "ablation", source)
    check_matrix(loaded.data, source)
    matrix: dict[str, Any] = loaded.data
    return matrix
