"""Generating the default world's files and its ground truth.

Calibrated to the regime of the real runs (memo §4): the base checkpoint near 0.5
reward, the final near 0.85, single chunks worth a few points at most, so that some
contrasts come out decisive and some inconclusive.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save_file

from skilleval.env.rollout import run_episode
from skilleval.skills.bank import Skill, render_markdown_bank
from skilleval.storage import atomic
from skilleval.storage.records import versioned
from skilleval.world.design import (
    FILLER_LAYERS,
    FILLER_WIDTH,
    HARMFUL,
    HELPFUL,
    NEUTRAL,
    BankDesign,
    CheckpointDesign,
    chunk_id,
)
from skilleval.world.shopsim import (
    ShopWorld,
    Task,
    catalogue_to_json,
    generate_catalogue,
    generate_tasks,
)
from skilleval.world.sim_policy import (
    DECISIONS,
    OUTCOME_DECISIONS,
    SECTION_SHIFT,
    ParsedTask,
    SimPolicy,
    decision_probabilities,
    hint_shifts,
    section_shift_of,
    with_section,
)


def world_task_files(
    seed: int, n_categories: int, per_category: int, split_sizes: Mapping[str, int]
) -> tuple[str, str]:
    """The text of the catalogue and of the split file."""
    rng = np.random.default_rng([seed, 1])
    catalogue = generate_catalogue(rng, n_categories, per_category)
    splits = {
        name: [t.as_json() for t in generate_tasks(rng, catalogue, size, f"{name}")]
        for name, size in split_sizes.items()
    }
    split_file = versioned("task_split", {"version": "v1", "world_seed": seed, **splits})
    return json.dumps(catalogue_to_json(catalogue), indent=1), json.dumps(split_file, indent=1)


def write_tasks(
    seed: int,
    n_categories: int,
    per_category: int,
    split_sizes: Mapping[str, int],
    catalogue_path: Path,
    split_path: Path,
) -> None:
    catalogue, splits = world_task_files(seed, n_categories, per_category, split_sizes)
    atomic.write_text(catalogue_path, catalogue)
    atomic.write_text(split_path, splits)


def checkpoint_tensors(seed: int, design: CheckpointDesign) -> dict[str, np.ndarray]:
    rng = np.random.default_rng([seed, 2])
    tensors: dict[str, np.ndarray] = {
        "policy.decision_logits": np.asarray(design.logits, dtype=np.float32),
        "policy.skill_receptivity": np.asarray([design.receptivity], dtype=np.float32),
    }
    if design.section_shift:
        # Written only when set, so the default world's checkpoints keep their bytes.
        tensors[SECTION_SHIFT] = np.asarray([design.section_shift], dtype=np.float32)
    for layer in range(FILLER_LAYERS):
        for proj in ("self_attn.q_proj", "mlp.up_proj"):
            weight = rng.standard_normal((FILLER_WIDTH, FILLER_WIDTH)).astype(np.float32)
            if design.training > 0:
                # Training moved later layers more than early ones.
                change = np.random.default_rng([seed, 3, layer]).standard_normal(weight.shape)
                step = 0.02 * (layer + 1) * design.training
                weight = weight + (step * change).astype(np.float32)
            tensors[f"model.layers.{layer}.{proj}.weight"] = weight
    return tensors


def checkpoint_config() -> str:
    return json.dumps({"model_type": "shopsim-policy", "decisions": list(DECISIONS)}, indent=1)


def write_checkpoint(seed: int, name: str, path: Path, design: CheckpointDesign) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # One metadata key only: safetensors writes metadata in hash-map order, so several
    # keys would make the same checkpoint's bytes (and fingerprint) differ run to run.
    save_file(checkpoint_tensors(seed, design), str(path), metadata={"shopsim_checkpoint": name})
    (path.parent / "config.json").write_text(checkpoint_config())


def design_bank(
    rng: np.random.Generator,
    prefix: str,
    helpful: int,
    harmful: int,
    neutral: int,
    max_shift: float,
) -> list[Skill]:
    kinds = ["helpful"] * helpful + ["harmful"] * harmful + ["neutral"] * neutral
    rng.shuffle(kinds)
    skills = []
    for i, kind in enumerate(kinds):
        if kind == "neutral":
            text = NEUTRAL[int(rng.integers(len(NEUTRAL)))]
            hint: dict[str, Any] = {
                "decision": "verbosity",
                "shift": round(float(rng.uniform(0, 1)), 3),
            }
        else:
            decision = OUTCOME_DECISIONS[int(rng.integers(len(OUTCOME_DECISIONS)))]
            text = (HELPFUL if kind == "helpful" else HARMFUL)[decision]
            sign = 1 if kind == "helpful" else -1
            shift = sign * float(rng.uniform(0.25 * max_shift, max_shift))
            hint = {"decision": decision, "shift": round(shift, 3)}
        body = f"{text}\n\n<!-- skilleval:hint {json.dumps(hint)} -->"
        skills.append(Skill(chunk_id=chunk_id(prefix, i), text=body, hints=(hint,)))
    return skills


def bank_text(seed: int, name: str, design: BankDesign) -> str:
    rng = np.random.default_rng([seed, 4, sum(map(ord, name))])
    chunks = design_bank(
        rng, name, design.helpful, design.harmful, design.neutral, design.max_shift
    )
    return render_markdown_bank(design.title, chunks)


def write_bank(seed: int, name: str, path: Path, design: BankDesign) -> None:
    atomic.write_text(path, bank_text(seed, name, design))


def outcome_table(world: ShopWorld, tasks: Sequence[Task], max_steps: int) -> np.ndarray:
    """Reward of every task under every combination of the outcome decisions.

    Computed through the real rollout loop with forced decisions, so it is exactly what
    a run would score for that combination. Shape: (tasks, 2**len(OUTCOME_DECISIONS)).
    """
    combos = list(itertools.product([False, True], repeat=len(OUTCOME_DECISIONS)))
    table = np.zeros((len(tasks), len(combos)))
    dummy = {
        "policy.decision_logits": np.zeros(len(DECISIONS)),
        "policy.skill_receptivity": np.ones(1),
    }
    for j, combo in enumerate(combos):
        forced = dict(zip(OUTCOME_DECISIONS, combo, strict=True)) | {"verbosity": False}

        def decider(_instruction: str, _task: ParsedTask, forced: dict[str, bool] = forced) -> Any:
            return forced.__getitem__

        policy = SimPolicy(dummy, 1.0, 10**9, False, "truth", decider=decider)
        for i, task in enumerate(tasks):
            table[i, j] = run_episode(policy, world, task.task_id, "", max_steps).rewards["reward"]
    return table


def expected_reward(table: np.ndarray, probs: Mapping[str, float]) -> np.ndarray:
    """Per-task expected reward given each outcome decision's probability."""
    combos = itertools.product([False, True], repeat=len(OUTCOME_DECISIONS))
    weights = np.array(
        [
            np.prod([probs[d] if chosen else 1 - probs[d] for d, chosen in chosen_by_decision])
            for chosen_by_decision in (zip(OUTCOME_DECISIONS, c, strict=True) for c in combos)
        ]
    )
    result: np.ndarray = table @ weights
    return result


def ground_truth(
    table_by_split: Mapping[str, np.ndarray],
    checkpoints: Mapping[str, Mapping[str, np.ndarray]],
    banks: Mapping[str, Sequence[Skill]],
    temperature: float,
) -> dict[str, Any]:
    """Expected reward of every checkpoint x bank and of every single chunk, per split.

    ``skills_section``: what a skills section does by itself, its common push on every
    outcome decision without any chunk's hint (0 unless world.skills_section_shift is
    set); a chunk's effect is its own, on top of that push: the section with the chunk
    minus the push alone (with no common effect: chunk minus free).
    """
    truth: dict[str, Any] = {"temperature": temperature, "splits": {}}
    for split, table in table_by_split.items():
        per_checkpoint: dict[str, Any] = {}
        for ck_name, tensors in checkpoints.items():
            logits = np.asarray(tensors["policy.decision_logits"], dtype=np.float64)
            receptivity = float(np.asarray(tensors["policy.skill_receptivity"]).reshape(-1)[0])
            section_shift = section_shift_of(tensors)

            def mean_reward(
                skills: Sequence[Skill],
                section: bool,
                logits: np.ndarray = logits,
                receptivity: float = receptivity,
                section_shift: float = section_shift,
                table: np.ndarray = table,
            ) -> float:
                shifts = hint_shifts([h for s in skills for h in s.hints])
                if section:
                    shifts = with_section(shifts, section_shift)
                probs = decision_probabilities(logits, receptivity, shifts, temperature)
                return float(expected_reward(table, probs).mean())

            free = mean_reward([], section=False)
            section_only = mean_reward([], section=True)
            per_checkpoint[ck_name] = {
                "free": free,
                "skills_section": section_only - free,
                "banks": {
                    name: mean_reward(skills, section=True) - free for name, skills in banks.items()
                },
                "chunks": {
                    name: {
                        s.chunk_id: mean_reward([s], section=True) - section_only for s in skills
                    }
                    for name, skills in banks.items()
                },
            }
        truth["splits"][split] = per_checkpoint
    return truth
