"""What the default world is made of: checkpoint parameters, skill bank designs, chunk texts.

Plain data, so the workflow can name the files the generator makes without importing it.
"""

from __future__ import annotations

# Per-decision logits at temperature 1 (order of DECISIONS) and skill receptivity.
CHECKPOINT_PARAMETERS: dict[str, tuple[tuple[float, ...], float]] = {
    "base": ((0.83, -0.24, -0.24, 0.0), 1.0),
    "final": ((1.77, 0.83, 1.04, -0.3), 0.6),
}
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
# name: (title, helpful, harmful, neutral, largest |logit shift| of one chunk). Draft
# chunks are rawer than selected ones, so their single effects spread wider.
BANK_DESIGN = {
    "S0": ("Initial skill bank S0 (cold start)", 5, 2, 3, 0.13),
    "ST": ("Final skill bank ST (iteration 80)", 5, 1, 2, 0.13),
    "draft16": ("Draft bank for ranking (16 chunks)", 6, 5, 5, 0.2),
}


def generated_files(world_dir: str) -> list[str]:
    """The registered inputs the generator writes: checkpoints, banks and the split file."""
    from skilleval import paths

    checkpoints = [
        paths.fill(paths.WORLD_CHECKPOINT, world_dir=world_dir, checkpoint=name)
        for name in CHECKPOINT_PARAMETERS
    ]
    banks = [paths.fill(paths.WORLD_BANK, world_dir=world_dir, bank=name) for name in BANK_DESIGN]
    return [*checkpoints, *banks, paths.fill(paths.WORLD_SPLITS, world_dir=world_dir)]
