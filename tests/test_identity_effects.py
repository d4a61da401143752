"""What an edit of a file would re-run, answered from evidence identities without starting
Snakemake: a model run whose fingerprint is unchanged restores its kept result, and an
ablation run whose identity is unchanged is not run again. tests/test_staleness.py asks
the same questions of a built graph, through dry runs and builds."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from skilleval.ablation.matrix import load_matrix
from skilleval.ablation.plan import plan as ablation_plan
from skilleval.provenance.digests import FileDigests
from skilleval.provenance.evidence import model_run_code, trainer_run_code
from skilleval.runs.resolve import resolve
from skilleval.workflow.rule_inputs import AblationInputs
from tests.conftest import REPO, load_default_config, plan_of

Config = dict[str, Any]
# The runs whose every input the world holds (the ranking arms read banks built later).
WORLD_RUNS = ("base-free", "base-S0", "final-free", "final-ST", "base-val-free")
BENCHMARKS = ("livemathematicianbench", "alfworld", "docvqa")


def world_config(world: Path) -> Config:
    """The shipped config, reading the world files in ``world``."""
    config = load_default_config()
    config["protocols"]["local-sglang"]["tasks"]["split_file"] = str(
        world / "persona_splits.v1.json"
    )
    for name, checkpoint in config["checkpoints"].items():
        checkpoint["path"] = str(world / "checkpoints" / name / "model.safetensors")
    for name, bank in config["banks"].items():
        bank["path"] = str(world / "banks" / f"{name}.md")
    return config


def fingerprints(config: Config) -> dict[str, str]:
    plan, code = plan_of(config), model_run_code()
    return {r: resolve(plan.run_inputs(plan.runs[r]), code).fingerprint for r in WORLD_RUNS}


@pytest.fixture()
def world(small_world: Path, tmp_path: Path) -> Path:
    """A copy of the session's world files, which a test may edit."""
    return Path(shutil.copytree(small_world, tmp_path / "world"))


def test_touching_a_checkpoint_keeps_every_run(world: Path) -> None:
    before = fingerprints(world_config(world))
    (world / "checkpoints" / "base" / "model.safetensors").touch()
    assert fingerprints(world_config(world)) == before


def test_identical_copies_under_new_paths_keep_every_run(world: Path, tmp_path: Path) -> None:
    config = world_config(world)
    before = fingerprints(config)
    copies = tmp_path / "copies"
    copies.mkdir()
    protocol = config["protocols"]["local-sglang"]
    for section, key, name in (
        (config["banks"]["S0"], "path", "S0.md"),
        (config["checkpoints"]["final"], "path", "model.safetensors"),
        (protocol["tasks"], "split_file", "splits.json"),
    ):
        section[key] = str(shutil.copy(section[key], copies / name))
    assert fingerprints(config) == before


def test_a_system_prompt_changes_every_run_by_its_text_not_its_name(
    world: Path, tmp_path: Path
) -> None:
    config = world_config(world)
    before = fingerprints(config)
    prompt = config["protocols"]["local-sglang"]["prompt"]
    prompt["system"] = str(shutil.copy(prompt["system"], tmp_path / "copy.system.txt"))
    assert fingerprints(config) == before
    (tmp_path / "terse.system.txt").write_text("You are a terse shopping assistant.\n")
    prompt["system"] = str(tmp_path / "terse.system.txt")
    after = fingerprints(config)
    assert all(after[run] != before[run] for run in WORLD_RUNS)


def ablation_identities(matrix_file: Path, digests: Path) -> dict[str, str]:
    inputs = AblationInputs(
        load_matrix(str(matrix_file)), str(matrix_file), trainer_run_code(), FileDigests(digests)
    )
    runs = ablation_plan(inputs.matrix)
    return {r.run_id: inputs.ablation_identity(SimpleNamespace(run_id=r.run_id)) for r in runs}


def matrix_edit(tmp_path: Path, edit: Callable[[str], str]) -> tuple[set[str], int]:
    """(ablation runs whose identity the edit of the seed matrix changes, runs in all)."""
    seed = tmp_path / "seed.yaml"
    shutil.copy(REPO / "config" / "ablation" / "matrix.yaml", seed)
    before = ablation_identities(seed, tmp_path / "digests.json")
    edited = tmp_path / "edited.yaml"
    edited.write_text(edit(seed.read_text()))
    after = ablation_identities(edited, tmp_path / "digests.json")
    assert set(after) == set(before)
    return {run for run in before if after[run] != before[run]}, len(before)


def test_one_learning_rate_changes_the_identity_of_exactly_three_runs(tmp_path: Path) -> None:
    old, new = '"2": {optimizer.learning_rate: 2}', '"2": {optimizer.learning_rate: 3}'
    changed, _ = matrix_edit(tmp_path, lambda text: text.replace(old, new))
    assert changed == {f"LR-{benchmark}-2" for benchmark in BENCHMARKS}


def test_an_identical_matrix_copy_changes_no_ablation_run(tmp_path: Path) -> None:
    changed, every = matrix_edit(tmp_path, lambda text: text)
    assert changed == set() and every > 3


def changed_runs(world: Path, path: str, edit: Callable[[bytes], bytes]) -> set[str]:
    """The runs whose fingerprint an edit of the world file at ``path`` changes."""
    before = fingerprints(world_config(world))
    edited = world / path
    edited.write_bytes(edit(edited.read_bytes()))
    after = fingerprints(world_config(world))
    return {run for run in WORLD_RUNS if after[run] != before[run]}


def test_a_shard_byte_changes_the_runs_of_its_checkpoint_only(world: Path) -> None:
    def flip(data: bytes) -> bytes:
        return data[:-1] + bytes([data[-1] ^ 1])

    path = "checkpoints/final/model.safetensors"
    assert changed_runs(world, path, flip) == {"final-free", "final-ST"}


def test_a_bank_edit_changes_the_runs_of_that_bank_only(world: Path) -> None:
    def add_a_line(data: bytes) -> bytes:
        assert b"## chunk st-01\n" in data
        return data.replace(b"## chunk st-01\n", b"## chunk st-01\n\nEdited.\n")

    assert changed_runs(world, "banks/ST.md", add_a_line) == {"final-ST"}


def test_a_split_file_edit_changes_every_run_that_reads_it(world: Path) -> None:
    """The split file is one input, compared by content: the val run reads it too."""

    def edit_a_test_task(data: bytes) -> bytes:
        splits = json.loads(data)
        splits["test"][0]["instruction"] += " Edited."
        return json.dumps(splits).encode()

    path = "persona_splits.v1.json"
    assert changed_runs(world, path, edit_a_test_task) == set(WORLD_RUNS)
