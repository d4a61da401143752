"""Rules of the ablation matrix that its JSON Schema cannot express: every name a group or
harness step uses is declared, every harness setting parses, no run is planned twice.

Each failure is a ConfigError naming the matrix file and line, the key, the value and a fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from skilleval.ablation.plan import harness_overrides, plan
from skilleval.config.matrix import Matrix
from skilleval.errors import ConfigError

HARNESS_FORMS = (
    "sched-{constant,linear,cosine}, lr<N>, batch<N>, batch-full, minibatch<N>, slow<N>, "
    "policy-{mixed,changed,unchanged}"
)


def _known(source: object, key: str, value: object, known: Mapping[str, Any], what: str) -> None:
    if value not in known:
        raise ConfigError(
            source,
            key,
            value,
            f"not a declared {what}",
            f"use one of {', '.join(sorted(known))}",
        )


def check_groups(matrix: Matrix, source: object) -> None:
    prefixes: dict[str, str] = {}
    for group, spec in matrix.groups.items():
        if spec.prefix in prefixes:
            raise ConfigError(
                source,
                f"groups.{group}.prefix",
                spec.prefix,
                f"already the prefix of groups.{prefixes[spec.prefix]}: their run ids "
                "would collide",
                "give every group its own prefix",
            )
        prefixes[spec.prefix] = group
        seen: set[str] = set()
        for i, bench in enumerate(spec.benchmarks):
            _known(source, f"groups.{group}.benchmarks.{i}", bench, matrix.benchmarks, "benchmark")
            if bench in seen:
                raise ConfigError(
                    source,
                    f"groups.{group}.benchmarks.{i}",
                    bench,
                    "listed twice",
                    "list every benchmark of the group once",
                )
            seen.add(bench)


def check_harness(matrix: Matrix, source: object) -> None:
    harness = matrix.harness
    for label, spec in harness.benchmarks.items():
        key = f"harness.benchmarks.{label}.benchmark"
        _known(source, key, spec.benchmark, matrix.benchmarks, "benchmark")
    for step_name, step in harness.steps.items():
        prefix = f"harness.steps.{step_name}"
        _known(source, f"{prefix}.backend", step.backend, harness.backends, "backend")
        if step.mirror is not None:
            mirrored = step.mirror
            _known(source, f"{prefix}.mirror", mirrored, harness.steps, "step")
            if harness.steps[mirrored].settings is None:
                raise ConfigError(
                    source,
                    f"{prefix}.mirror",
                    mirrored,
                    "mirrors a step that has no settings of its own",
                    "mirror a step that lists settings",
                )
            continue
        if step.settings is None:
            raise ConfigError(
                source, prefix, step_name, "has neither settings nor mirror", "add settings"
            )
        for label, names in step.settings.items():
            _known(source, f"{prefix}.settings.{label}", label, harness.benchmarks, "benchmark")
            for i, setting in enumerate(names):
                try:
                    harness_overrides(setting, 1)
                except ValueError as error:
                    raise ConfigError(
                        source,
                        f"{prefix}.settings.{label}.{i}",
                        setting,
                        str(error),
                        f"write a setting of the forms {HARNESS_FORMS}",
                    ) from None


def check_matrix(matrix: Matrix, source: object) -> None:
    check_groups(matrix, source)
    check_harness(matrix, source)
    check_contract(matrix, source)
    try:
        plan(matrix)
    except ValueError as error:
        raise ConfigError(
            source, "groups", str(error), "two entries plan the same run", "rename one of them"
        ) from None


def check_contract(matrix: Matrix, source: object) -> None:
    """Each declared log line is a regular expression with the value in a group."""
    lines = matrix.trainer.contract.log_lines
    for name, pattern in (lines.settings() if lines else {}).items():
        key = f"trainer.contract.log_lines.{name}"
        try:
            groups = re.compile(pattern).groups
        except re.error as error:
            raise ConfigError(
                source, key, pattern, f"is no regular expression ({error})", "fix the pattern"
            ) from None
        if groups < 1:
            raise ConfigError(
                source, key, pattern, "has no capture group, and the audit reads the value "
                "from the first", "put the value's part of the pattern in (...)",
            )  # fmt: skip
