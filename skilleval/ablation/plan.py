"""Expanding the matrix config into planned runs, in the seed's run-id naming.

One run per (benchmark, group, value); a value whose effective config equals the
default reuses the default run and is not planned again; ``full`` batch expands to the
benchmark's train size. Harness runs come from the step lists, one canonical source
skill per benchmark.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from skilleval import paths
from skilleval.config.matrix import Matrix, Overrides
from skilleval.storage.hashing import canonical_hash

SECTIONS = ("prior", "3.1", "3.2", "3.4", "3.5", "harness-1", "harness-2", "harness-3")


@dataclass(frozen=True)
class PlannedRun:
    run_id: str
    section: str
    benchmark: str
    group: str
    value: str
    overrides: dict[str, Any]
    harness: dict[str, Any] | None = field(default=None)

    @property
    def setting(self) -> dict[str, Any]:
        """The overrides that define this run's value (harness runs: beyond the harness)."""
        return self.harness["setting"] if self.harness else self.overrides

    @property
    def summary_path(self) -> str:
        return paths.fill(paths.ABLATION_SUMMARY, bench=self.benchmark, run_id=self.run_id)

    @property
    def lock_path(self) -> str:
        """Writer lock of the run's out_root (beside it: Snakemake owns the folder)."""
        return paths.fill(paths.ABLATION_LOCK, bench=self.benchmark, run_id=self.run_id)

    @property
    def out_root(self) -> str:
        return paths.fill(paths.ABLATION_RUN_DIR, bench=self.benchmark, run_id=self.run_id)

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.run_id,
            "section": self.section,
            "benchmark": self.benchmark,
            "group": self.group,
            "value": self.value,
            "overrides": self.overrides,
            "harness": self.harness,
            "setting": self.setting,
        }


def audit_path(run: PlannedRun) -> str:
    return paths.fill(paths.ABLATION_AUDIT, bench=run.benchmark, run_id=run.run_id)


def run_files(runs: list[PlannedRun]) -> dict[str, tuple[str, str]]:
    """Run id -> (summary, audit) paths, as the graph builds them."""
    return {run.run_id: (run.summary_path, audit_path(run)) for run in runs}


def benchmark_defaults(matrix: Matrix, bench: str) -> dict[str, Any]:
    """The default setting as it applies to one benchmark (its config, split, token cap)."""
    spec = matrix.benchmarks[bench]
    return {
        **matrix.default,
        "env.config": spec.config,
        "env.split_dir": spec.split_dir,
        "model.max_tokens": spec.max_tokens,
    }


def resolve(overrides: Overrides, matrix: Matrix, bench: str) -> dict[str, Any]:
    train = matrix.benchmarks[bench].sizes.train
    resolved = {}
    for key, value in overrides.items():
        if value == "full" and key == "train.batch_size":
            value = train
        elif isinstance(value, str):
            value = value.format(bench=bench)
        resolved[key] = value
    return resolved


def default_run_id(bench: str) -> str:
    return f"DEFAULT-{bench}-5.5"


def group_rows(
    matrix: Matrix, planned: Iterable[str], group: str, bench: str
) -> list[tuple[str, str, bool]]:
    """(value, run id, reused default) of every point of one group on one benchmark.

    A value whose run is not planned is the default setting: its row reuses the
    benchmark's default run.
    """
    spec, ids = matrix.groups[group], set(planned)
    rows = []
    for value in spec.values:
        run_id = f"{spec.prefix}-{bench}-{value}"
        reused = run_id not in ids
        rows.append((str(value), default_run_id(bench) if reused else run_id, reused))
    return rows


def ablation_runs(matrix: Matrix) -> list[PlannedRun]:
    runs: list[PlannedRun] = []
    for bench, spec in matrix.benchmarks.items():
        if spec.prior_default:
            runs.append(PlannedRun(default_run_id(bench), "prior", bench, "default", "5.5", {}))
    for group, group_spec in matrix.groups.items():
        for bench in group_spec.benchmarks:
            base = benchmark_defaults(matrix, bench)
            for value, overrides in group_spec.values.items():
                combined = resolve({**group_spec.fixed, **overrides}, matrix, bench)
                declared = {k: v for k, v in combined.items() if base.get(k) != v}
                if group != "default" and not declared:
                    continue  # equals the default setting: the default run is reused
                run_id = f"{group_spec.prefix}-{bench}-{value}"
                runs.append(
                    PlannedRun(run_id, group_spec.section, bench, group, str(value), combined)
                )
    return runs


HARNESS_SETTING = re.compile(r"^(?P<kind>sched|lr|batch|minibatch|slow|policy)-?(?P<value>.+)$")


def harness_overrides(setting: str, full_batch: int) -> dict[str, Any]:
    match = HARNESS_SETTING.match(setting)
    if match is None:
        raise ValueError(f"unknown harness setting {setting!r}")
    kind, value = match.group("kind"), match.group("value")
    choices = {
        "sched": ("constant", "linear", "cosine"),
        "policy": ("mixed", "changed", "unchanged"),
    }
    if kind in choices and value not in choices[kind]:
        raise ValueError(f"unknown {kind} value {value!r} (one of {', '.join(choices[kind])})")
    numeric = kind in ("lr", "minibatch", "slow") or (kind == "batch" and value != "full")
    if numeric and not value.isdigit():
        raise ValueError(f"{kind} needs a whole number, not {value!r}")
    if kind == "sched":
        return {
            "optimizer.learning_rate": 4,
            "optimizer.lr_scheduler": value,
            "optimizer.min_learning_rate": 2,
        }
    if kind == "lr":
        return {
            "optimizer.learning_rate": int(value),
            "optimizer.lr_scheduler": "constant",
            "optimizer.min_learning_rate": 1,
        }
    if kind == "batch":
        return {"train.batch_size": full_batch if value == "full" else int(value)}
    if kind == "minibatch":
        return {"gradient.minibatch_size": int(value)}
    if kind == "slow":
        return {"optimizer.slow_update_samples": int(value)}
    return {"optimizer.longitudinal_pair_policy": value}


def harness_runs(matrix: Matrix) -> list[PlannedRun]:
    harness = matrix.harness
    runs = []
    for section, step in harness.steps.items():
        settings = harness.steps[step.mirror].settings if step.mirror else step.settings
        backend = step.backend
        for short, names in (settings or {}).items():
            bench_spec = harness.benchmarks[short]
            for setting in names:
                overrides = {
                    **harness.fixed,
                    "model.student_backend": harness.backends[backend],
                    **bench_spec.env,
                    "env.skill_init": bench_spec.skill_init,
                    "env.split_dir": bench_spec.split_dir,
                }
                declared = harness_overrides(setting, bench_spec.full_batch)
                overrides.update(declared)
                run_id = f"HARNESS-{backend}-{short}-{setting}{bench_spec.suffix}"
                runs.append(
                    PlannedRun(
                        run_id,
                        section,
                        bench_spec.benchmark,
                        "harness",
                        setting,
                        overrides,
                        {
                            "backend": backend,
                            "benchmark_label": short,
                            "skill_init": bench_spec.skill_init,
                            "setting": declared,
                        },
                    )
                )
    return runs


def plan(matrix: Matrix) -> list[PlannedRun]:
    runs = ablation_runs(matrix) + harness_runs(matrix)
    seen: dict[str, PlannedRun] = {}
    for run in runs:
        if run.run_id in seen:
            raise ValueError(f"run id {run.run_id} planned twice ({seen[run.run_id].section})")
        seen[run.run_id] = run
    return runs


def effective_config(run: PlannedRun, matrix: Matrix) -> dict[str, Any]:
    return {
        **benchmark_defaults(matrix, run.benchmark),
        **run.overrides,
        "env.out_root": run.out_root,
    }


def plan_fingerprint(run: PlannedRun, matrix: Matrix) -> str:
    return canonical_hash(
        {
            "config": effective_config(run, matrix),
            "trainer": matrix.trainer.kind,
            "sizes": matrix.benchmarks[run.benchmark].sizes.settings(),
        }
    )[:16]
