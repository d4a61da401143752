"""The config as typed values, built once when the workflow is parsed.

The JSON schemas (schemas/) check a config file and word its errors for the user; the
cross-field checks (checks.py) check what one key says about another. What passed both
becomes a :class:`Config`: rules read typed attributes rather than nested mappings. The
models mirror the schema key for key (tests/test_config_model.py holds them to it);
:meth:`Section.settings` gives a section back as the mapping it was written as, which is
what params and identities hash.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field

from skilleval.protocol.sections import Number, Protocol, Section, Split


class SplitSizes(Section):
    train: int
    val: int
    test: int


class World(Section):
    kind: Literal["shopsim"]
    seed: int
    dir: str
    categories: int
    products_per_category: int
    skills_section_shift: Number = 0
    split_sizes: SplitSizes


class Backends(Section):
    policy: Literal["sim", "openai"]
    environment: str
    model_server: Literal["none", "external", "process", "docker"]
    jobs_run_on: Literal["this_host", "cluster_nodes"] = "this_host"


class Checkpoint(Section):
    checkpoint_id: str
    path: str
    fingerprint: str | None


class Bank(Section):
    path: str
    chunks: int
    role: Literal["initial", "final", "ranking"]


class Run(Section):
    experiment: str
    protocol: str
    checkpoint: str
    bank: str | None
    split: Split | None = None


class Contrast(Section):
    control: str
    treatment: str
    causal: bool
    description: str
    metric: str = "reward"


class RegisteredRandomBank(Section):
    seed: int
    chunk_ids: list[str]
    drawn_by: str
    note: str


class ExperimentB(Section):
    masked_runs: int
    design_seed: int


class Ranking(Section):
    gate: str
    bank: str
    bare_val_run: str
    bare_test_run: str
    k: int
    masked_runs: int
    inclusion_probability: Number
    design_seed: int
    random_seeds: list[int]
    random_seeds_in_paper: list[int]
    registered_random_banks: list[RegisteredRandomBank] = Field(default_factory=list)
    experiment_b: ExperimentB


class Ablation(Section):
    matrix: str


# The paired intervals a contrast can report (analysis/bootstrap.py computes each).
IntervalMethod = Literal["percentile", "BCa", "studentized", "t"]
INTERVAL_METHODS: tuple[IntervalMethod, ...] = get_args(IntervalMethod)
# How tables and captions name each ("its 95% percentile bootstrap interval").
INTERVAL_NAMES: dict[str, str] = {
    "percentile": "percentile bootstrap",
    "BCa": "BCa bootstrap",
    "studentized": "bootstrap-t",
    "t": "t",
}


class Statistics(Section):
    n_resamples: int
    confidence: Number
    seed: int
    method: IntervalMethod


class Config(Section):
    world: World
    backends: Backends
    protocols: dict[str, Protocol]
    checkpoints: dict[str, Checkpoint]
    banks: dict[str, Bank]
    runs: dict[str, Run]
    contrasts: dict[str, Contrast]
    ranking: Ranking
    ablation: Ablation
    statistics: Statistics
