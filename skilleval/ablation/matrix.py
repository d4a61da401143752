"""The ablation matrix read from its file: parsed, validated against its schema, and every
rule of ablation.checks held on its typed values (config.matrix), before anything is
planned from it."""

from __future__ import annotations

from pathlib import Path

from skilleval.ablation.checks import check_matrix
from skilleval.config.loading import ConfigSources, read_mapping
from skilleval.config.matrix import Matrix
from skilleval.config.schema import as_typed, validate_against_schema


def load_matrix(path: str | Path = "config/ablation/matrix.yaml") -> Matrix:
    """The matrix, refused (file, line, key, fix) unless it parses and every rule holds."""
    loaded = read_mapping(path, "ablation matrix", "ablation.matrix")
    source = ConfigSources([loaded])
    validate_against_schema(loaded.data, "ablation", source)
    matrix = as_typed(Matrix, loaded.data, source)
    check_matrix(matrix, source)
    return matrix
