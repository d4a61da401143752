"""What an edit of the config would re-run, answered from the plan's params and identities
without starting Snakemake. Snakemake re-runs a job when its params change, so equal
params here mean nothing planned; tests/test_staleness.py asks the same of built graphs."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from tests.conftest import REPO, plan_of

Config = dict[str, Any]


def shipped() -> Config:
    config: Config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    return config


def run_settings(config: Config) -> dict[str, dict[str, Any]]:
    """Each model run's params (its settings, which hold its protocol's evidence)."""
    plan = plan_of(config)
    runs = {**plan.runs, **{m.name: m for m in plan.masked.values()}}
    return {name: plan.run_inputs(run).settings() for name, run in runs.items()}


def contrast_specs(config: Config) -> dict[str, dict[str, Any]]:
    return {name: c.spec() for name, c in plan_of(config).contrasts.items()}


def changed(edit: Callable[[Config], None]) -> tuple[set[str], set[str]]:
    """(model runs, contrasts) whose params the edit changes."""
    before = shipped()
    after = copy.deepcopy(before)
    edit(after)
    runs_before, runs_after = run_settings(before), run_settings(after)
    specs_before, specs_after = contrast_specs(before), contrast_specs(after)
    return (
        {r for r in runs_before if runs_before[r] != runs_after.get(r)},
        {c for c in specs_before if specs_before[c] != specs_after.get(c)},
    )


def protocol(config: Config) -> Config:
    section: Config = config["protocols"]["local-sglang"]
    return section


EVERY_RUN = set(run_settings(shipped()))
FINAL_RUNS = {"final-free", "final-ST"}


def set_temperature(c: Config) -> None:
    protocol(c)["sampling"]["temperature"] = 0.7


def set_description(c: Config) -> None:
    c["contrasts"]["s0-gain"]["description"] = "another wording"


def set_resamples(c: Config) -> None:
    c["statistics"]["n_resamples"] = 2000


def set_final_checkpoint(c: Config) -> None:
    c["checkpoints"]["final"]["checkpoint_id"] = "qwen35-4b-iter81"


def set_port(c: Config) -> None:
    protocol(c)["execution"]["model_server"]["base_url"] = "http://127.0.0.1:30016/v1"


def set_protocol_description(c: Config) -> None:
    protocol(c)["description"] = "another wording"


def swap_contrast_roles(c: Config) -> None:
    spec = c["contrasts"]["s0-gain"]
    spec["control"], spec["treatment"] = spec["treatment"], spec["control"]


EDITS: dict[str, tuple[Callable[[Config], None], set[str], set[str]]] = {
    "a sampling value re-runs every run of its protocol": (set_temperature, EVERY_RUN, set()),
    "a contrast's wording re-runs nothing": (set_description, set(), set()),
    "n_resamples re-runs no model run and changes no contrast spec": (
        set_resamples, set(), set(),
    ),
    "a checkpoint id re-runs the runs of that checkpoint only": (
        set_final_checkpoint, FINAL_RUNS, set(),
    ),
    "the model server's port re-runs nothing": (set_port, set(), set()),
    "a protocol's description re-runs nothing": (set_protocol_description, set(), set()),
    "swapping a contrast's runs changes that contrast only": (
        swap_contrast_roles, set(), {"s0-gain"},
    ),
}  # fmt: skip


@pytest.mark.parametrize("question", sorted(EDITS))
def test_what_an_edit_would_rerun(question: str) -> None:
    edit, runs, contrasts = EDITS[question]
    assert changed(edit) == (runs, contrasts)
