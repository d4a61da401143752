"""What the default world is made of: checkpoint parameters, skill bank designs, chunk texts.

Plain data, so the workflow can name the files the generator makes without importing it.
The world generates every checkpoint and bank the config registers under world.dir,
whatever their names: checkpoints by their order (the first is the untrained base, the
last the trained model, those between lie in between), banks by their role and size.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from skilleval import paths

# Per-decision logits at temperature 1 (order of DECISIONS) and skill receptivity, of the
# untrained and of the trained checkpoint.
BASE_PARAMETERS = ((0.83, -0.24, -0.24, 0.0), 1.0)
TRAINED_PARAMETERS = ((1.77, 0.83, 1.04, -0.3), 0.6)
FILLER_LAYERS = 6
FILLER_WIDTH = 48

HELPFUL = {
    "read_category": "Re-read the request and search for the exact product category it names.",
    "price_filter": "Always pass the persona's budget as `max_price` when you search.",
    "inspect": "Before buying, open candidates with `view` and check every required feature.",
}
HARMFUL = {
    "read_category": "Infer what the persona really needs instead of the literal category.",
    "price_filter": "Search without a price filter first so you see every option.",
    "inspect": "Buy the most popular result right away; viewing products wastes steps.",
}
NEUTRAL = (
    "Greet the persona politely before you start.",
    "Summarise the purchase in one sentence at the end.",
    "Prefer plain language over jargon when you explain a choice.",
    "Keep a short list of the products you considered.",
    "Think step by step and write out your reasoning in detail.",
)
# role: (title, helpful, harmful, neutral, largest |logit shift| of one chunk). Draft
# chunks are rawer than selected ones, so their single effects spread wider.
ROLE_DESIGN = {
    "initial": ("Initial skill bank {name} (cold start)", 5, 2, 3, 0.13),
    "final": ("Final skill bank {name} (iteration 80)", 5, 1, 2, 0.13),
    "ranking": ("Draft bank for ranking ({chunks} chunks)", 6, 5, 5, 0.2),
}


@dataclass(frozen=True)
class CheckpointDesign:
    logits: tuple[float, ...]
    receptivity: float
    # How far training moved the weights: 0 for the base, 1 for the trained checkpoint.
    training: float
    # world.skills_section_shift: what a skills section of any content does to every
    # outcome decision's logit (0: nothing; the memo's model assumes that).
    section_shift: float = 0.0

    def as_params(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class BankDesign:
    title: str
    helpful: int
    harmful: int
    neutral: int
    max_shift: float

    def as_params(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class WorldDesign:
    """The checkpoints and banks the world generates, by the name in their world path."""

    world_dir: str
    checkpoints: dict[str, CheckpointDesign]
    banks: dict[str, BankDesign]

    def generated_files(self) -> list[str]:
        """The registered inputs the generator writes: checkpoints, banks and split file."""
        checkpoints = [
            paths.fill(paths.WORLD_CHECKPOINT, world_dir=self.world_dir, checkpoint=name)
            for name in self.checkpoints
        ]
        banks = [
            paths.fill(paths.WORLD_BANK, world_dir=self.world_dir, bank=name) for name in self.banks
        ]
        return [*checkpoints, *banks, paths.fill(paths.WORLD_SPLITS, world_dir=self.world_dir)]


def _world_name(path: str, template: str, world_dir: str, field: str) -> str | None:
    """The name a world path gives its file (checkpoints/<name>/..., banks/<name>.md)."""
    candidate = Path(path).parent.name if field == "checkpoint" else Path(path).stem
    expected = paths.fill(template, world_dir=world_dir, **{field: candidate})
    return candidate if Path(expected) == Path(path) else None


def chunk_id(bank: str, index: int) -> str:
    """The id the world gives chunk ``index`` (from 0) of the bank it writes as ``bank``."""
    return f"{bank.lower()}-{index + 1:02d}"


def world_bank_chunk_ids(config: Mapping[str, Any], path: str, chunks: int) -> list[str] | None:
    """The chunk ids the world writes to the bank at ``path``; None when it writes no bank
    there (a bank file of the user's own)."""
    name = _world_name(path, paths.WORLD_BANK, str(config["world"]["dir"]), "bank")
    return None if name is None else [chunk_id(name, i) for i in range(chunks)]


def checkpoint_design(position: int, count: int, section_shift: float = 0.0) -> CheckpointDesign:
    if position == 0 or count < 2:
        return CheckpointDesign(*BASE_PARAMETERS, training=0.0, section_shift=section_shift)
    if position == count - 1:
        return CheckpointDesign(*TRAINED_PARAMETERS, training=1.0, section_shift=section_shift)
    t = position / (count - 1)
    (base_logits, base_rec), (final_logits, final_rec) = BASE_PARAMETERS, TRAINED_PARAMETERS
    logits = tuple(
        round(a + t * (b - a), 4) for a, b in zip(base_logits, final_logits, strict=True)
    )
    receptivity = round(base_rec + t * (final_rec - base_rec), 4)
    return CheckpointDesign(logits, receptivity, t, section_shift)


def bank_design(name: str, role: str, chunks: int) -> BankDesign:
    """The role's mix of helpful, harmful and neutral chunks, scaled to ``chunks``."""
    title, helpful, harmful, neutral, max_shift = ROLE_DESIGN[role]
    total = helpful + harmful + neutral
    if chunks != total:
        helpful = max(1, round(helpful * chunks / total)) if chunks > 1 else chunks
        harmful = min(round(harmful * chunks / total), chunks - helpful)
        neutral = chunks - helpful - harmful
    return BankDesign(title.format(name=name, chunks=chunks), helpful, harmful, neutral, max_shift)


def world_design(config: Mapping[str, Any]) -> WorldDesign:
    """What the world generates for this config: every checkpoint and bank registered at
    a world path (checkpoints/<name>/model.safetensors, banks/<name>.md under world.dir)."""
    world_dir = str(config["world"]["dir"])
    names = [
        _world_name(c["path"], paths.WORLD_CHECKPOINT, world_dir, "checkpoint")
        for c in config["checkpoints"].values()
    ]
    world_checkpoints = [n for n in dict.fromkeys(names) if n is not None]
    section_shift = float(config["world"].get("skills_section_shift", 0.0))
    checkpoints = {
        name: checkpoint_design(i, len(world_checkpoints), section_shift)
        for i, name in enumerate(world_checkpoints)
    }
    banks = {}
    for bank in config["banks"].values():
        name = _world_name(bank["path"], paths.WORLD_BANK, world_dir, "bank")
        if name is not None:
            banks[name] = bank_design(name, bank["role"], bank["chunks"])
    return WorldDesign(world_dir, checkpoints, banks)
