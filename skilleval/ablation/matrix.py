"""The ablation matrix read from its file: parsed, validated against its schema, and every
rule of ablation.checks held on its typed values (config.matrix), before anything is
planned from it.

A lab's matrix may hold only what differs from another: ``extends: PATH`` (relative to the
file) names the matrix it is merged over, key by key as config overlays are, so changing
the trainer or a benchmark is a few lines rather than a copy of the whole matrix.
"""

from __future__ import annotations

import copy
from pathlib import Path

from skilleval.ablation.checks import check_matrix
from skilleval.config.loading import ConfigSources, YamlFile, merge, read_mapping
from skilleval.config.matrix import Matrix
from skilleval.config.schema import as_typed, validate_against_schema
from skilleval.errors import ConfigError

EXTENDS = "extends"


def matrix_files(path: str | Path, seen: tuple[Path, ...] = ()) -> list[YamlFile]:
    """The matrix file and every file it extends, the one extended first."""
    loaded = read_mapping(path, "ablation matrix", "ablation.matrix" if not seen else EXTENDS)
    base = loaded.data.get(EXTENDS)
    if base is None:
        return [loaded]
    if not isinstance(base, str):
        raise ConfigError(
            loaded.path, EXTENDS, base, "not a path", "name the matrix file this one extends"
        )
    resolved = (Path(path).parent / base).resolve()
    if resolved in (*seen, Path(path).resolve()):
        raise ConfigError(
            loaded.path,
            EXTENDS,
            base,
            "extends a matrix that extends this one",
            "break the loop: one matrix must hold every key",
        )
    return [*matrix_files(resolved, (*seen, Path(path).resolve())), loaded]


def load_matrix(path: str | Path = "config/ablation/matrix.yaml") -> Matrix:
    """The matrix, refused (file, line, key, fix) unless it parses and every rule holds."""
    files = matrix_files(path)
    data: dict[str, object] = {}
    for loaded in files:
        merge(data, copy.deepcopy({k: v for k, v in loaded.data.items() if k != EXTENDS}))
    source = ConfigSources(files)
    validate_against_schema(data, "ablation", source)
    matrix = as_typed(Matrix, data, source)
    check_matrix(matrix, source)
    return matrix
