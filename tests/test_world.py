from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

from skilleval.env.rollout import run_episode
from skilleval.skills.bank import load_bank
from skilleval.world.generate import expected_reward, ground_truth, outcome_table
from skilleval.world.shopsim import ShopWorld, Task, catalogue_from_json
from skilleval.world.sim_policy import (
    OUTCOME_DECISIONS,
    SimPolicy,
    decision_probabilities,
    hint_shifts,
)
from tests.conftest import DEFAULT_PROMPT


def load_world(root: Path) -> tuple[ShopWorld, list[Task]]:
    splits = json.loads((root / "persona_splits.v1.json").read_text())
    tasks = [Task.from_json(t) for t in splits["test"]]
    catalogue = catalogue_from_json(
        json.loads((root / "catalogue.json").read_text()), "catalogue.json"
    )
    return ShopWorld(catalogue, tasks), tasks


def test_split_file_has_the_real_shape_and_solvable_tasks(small_world: Path) -> None:
    splits = json.loads((small_world / "persona_splits.v1.json").read_text())
    assert {"val", "test"} <= set(splits)
    world, tasks = load_world(small_world)
    for task in tasks:
        assert any(
            p.category == task.category
            and p.price <= task.budget
            and set(task.required_attributes) <= set(p.attributes)
            for p in world.products.values()
        ), task.task_id


def test_banks_match_registry_sizes_and_carry_hints(small_world: Path) -> None:
    for name, size in (("S0", 10), ("ST", 8), ("draft16", 16)):
        skills = load_bank(small_world / "banks" / f"{name}.md", size)
        assert all(s.hints for s in skills)
        assert "skilleval:hint" in DEFAULT_PROMPT.message(skills)


def test_outcome_table_is_what_the_rollout_scores(small_world: Path) -> None:
    world, tasks = load_world(small_world)
    table = outcome_table(world, tasks[:10], max_steps=30)
    tensors = load_file(str(small_world / "checkpoints" / "base" / "model.safetensors"))
    # Probabilities of exactly 0/1 force one combination: the rollout must score its column.
    for column, combo in enumerate([(True, True, True), (True, False, False)]):
        index = sum(int(c) << (len(combo) - 1 - i) for i, c in enumerate(combo))
        forced = dict(zip(OUTCOME_DECISIONS, combo, strict=True)) | {"verbosity": False}
        policy = SimPolicy(
            tensors, 0.6, 4096, True, "x", decider=lambda *_, f=forced: f.__getitem__
        )
        for i, task in enumerate(tasks[:10]):
            result = run_episode(policy, world, task.task_id, "", 30)
            assert result.rewards["reward"] == table[i, index], (column, task.task_id)


def test_ground_truth_calibration_and_shrinking_effects(small_world: Path) -> None:
    world, tasks = load_world(small_world)
    table = outcome_table(world, tasks, max_steps=30)
    checkpoints = {
        n: load_file(str(small_world / "checkpoints" / n / "model.safetensors"))
        for n in ("base", "final")
    }
    banks = {n: load_bank(small_world / "banks" / f"{n}.md") for n in ("S0", "ST")}
    truth = ground_truth({"test": table}, checkpoints, banks, temperature=0.6)["splits"]["test"]
    assert 0.35 < truth["base"]["free"] < 0.65
    assert 0.75 < truth["final"]["free"] < 0.95
    assert truth["base"]["banks"]["S0"] > 0
    assert abs(truth["final"]["banks"]["S0"]) < abs(truth["base"]["banks"]["S0"])
    largest = max(abs(v) for v in truth["base"]["chunks"]["S0"].values())
    assert 0.003 < largest < 0.06


def test_expected_reward_matches_monte_carlo(small_world: Path) -> None:
    world, tasks = load_world(small_world)
    table = outcome_table(world, tasks, max_steps=30)
    tensors = load_file(str(small_world / "checkpoints" / "base" / "model.safetensors"))
    probs = decision_probabilities(tensors["policy.decision_logits"], 1.0, hint_shifts([]), 0.6)
    exact = expected_reward(table, probs).mean()
    means = []
    for salt in range(30):
        policy = SimPolicy(tensors, 0.6, 4096, False, f"salt-{salt}")
        means.append(
            np.mean(
                [
                    run_episode(policy, world, t.task_id, DEFAULT_PROMPT.message([]), 30).rewards[
                        "reward"
                    ]
                    for t in tasks
                ]
            )
        )
    assert abs(np.mean(means) - exact) < 4 * np.std(means) / np.sqrt(len(means)) + 0.01


def test_world_files_are_byte_identical_when_regenerated(tmp_path: Path) -> None:
    from skilleval.world.design import bank_design, checkpoint_design
    from skilleval.world.generate import write_bank, write_checkpoint

    for i in range(2):
        write_checkpoint(
            7, "final", tmp_path / str(i) / "model.safetensors", checkpoint_design(1, 2)
        )
        write_bank(
            7, "draft16", tmp_path / str(i) / "draft16.md", bank_design("draft16", "ranking", 16)
        )
    for name in ("model.safetensors", "draft16.md"):
        assert (tmp_path / "0" / name).read_bytes() == (tmp_path / "1" / name).read_bytes()


def test_a_skills_section_shift_is_a_common_effect_the_truth_separates(
    small_world: Path, tmp_path: Path
) -> None:
    """world.skills_section_shift: every prompt with skills gets the same push; the ground
    truth reports it as skills_section and keeps each chunk's own effect apart from it."""
    from skilleval.world.design import checkpoint_design
    from skilleval.world.generate import write_checkpoint
    from skilleval.world.sim_policy import SECTION_SHIFT

    world, tasks = load_world(small_world)
    table = outcome_table(world, tasks, max_steps=30)
    plain = load_file(str(small_world / "checkpoints" / "base" / "model.safetensors"))
    assert SECTION_SHIFT not in plain  # the default world writes no such tensor
    write_checkpoint(7, "base", tmp_path / "model.safetensors", checkpoint_design(0, 2, 0.3))
    shifted = load_file(str(tmp_path / "model.safetensors"))
    assert float(shifted[SECTION_SHIFT][0]) == np.float32(0.3)
    banks = {"draft16": load_bank(small_world / "banks" / "draft16.md")}
    truth = ground_truth({"val": table}, {"plain": plain, "shifted": shifted}, banks, 0.6)
    plain_truth, shifted_truth = truth["splits"]["val"]["plain"], truth["splits"]["val"]["shifted"]
    assert plain_truth["skills_section"] == 0.0
    assert 0.01 < shifted_truth["skills_section"] < 0.2
    assert shifted_truth["free"] == plain_truth["free"]  # no skills, no section, no push
    # A bank's effect against free carries the section's; a chunk's own effect does not.
    for name, chunk in shifted_truth["chunks"]["draft16"].items():
        assert abs(chunk - plain_truth["chunks"]["draft16"][name]) < 0.02
    # The policy reads the tensor and pushes its decisions as the truth says it does.
    skills = banks["draft16"][:1]
    chunk = skills[0].chunk_id
    expected = shifted_truth["free"] + shifted_truth["skills_section"]
    expected += shifted_truth["chunks"]["draft16"][chunk]
    prompt = DEFAULT_PROMPT.message(skills)
    means = [
        np.mean(
            [
                run_episode(
                    SimPolicy(shifted, 0.6, 4096, False, f"salt-{salt}"),
                    world,
                    t.task_id,
                    prompt,
                    30,
                ).rewards["reward"]
                for t in tasks
            ]
        )
        for salt in range(30)
    ]
    assert abs(np.mean(means) - expected) < 4 * np.std(means) / np.sqrt(len(means)) + 0.01
