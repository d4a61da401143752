"""The config as typed values, built once when the workflow is parsed.

The JSON schemas (schemas/) check a config file and word its errors for the user; the
cross-field checks (checks.py) check what one key says about another. What passed both
becomes a :class:`Config`: rules read typed attributes rather than nested mappings. The
models mirror the schema key for key (tests/test_config_model.py holds them to it);
:meth:`Section.settings` gives a section back as the mapping it was written as, which is
what params and identities hash.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from skilleval.config.execution import Execution, Section

# An int stays an int (its repr is in params and digests), a float a float.
Number = int | float
Split = Literal["train", "val", "test"]


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


class EnvironmentCapacity(Section):
    slots: int
    options: dict[str, Any] = Field(default_factory=dict)


class Served(Section):
    """What a protocol's model server serves (checked by its identity)."""

    tp: int | None
    dp_size: int | None
    tool_call_parser: str | None
    reasoning_parser: str | None
    model: str | None = None
    engine: Literal["sglang", "vllm", "llama-cpp-python", "llama.cpp", "openai"] | None = None
    identity: Literal["verify", "trust"] = "verify"


class Sampling(Section):
    temperature: Number
    top_p: Number
    top_k: int | None
    max_tokens: int
    enable_thinking: bool
    tool_choice: Literal["auto", "required", "none"]
    send_seed: bool
    trust_env: bool


class Runtime(Section):
    max_steps: int
    concurrency: int
    seed: int
    repeats: int
    max_skills: None
    episode_timeout_s: Number | None


class Tasks(Section):
    split_file: str
    split: Split


class Prompt(Section):
    system: str
    skill_template: str


class Metrics(Section):
    main: str
    auxiliary: list[str]
    required_coverage: Number


class Protocol(Section):
    description: str
    environment: EnvironmentCapacity
    model_server: Served
    sampling: Sampling
    runtime: Runtime
    execution: Execution
    tasks: Tasks
    prompt: Prompt
    metrics: Metrics


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


class Statistics(Section):
    n_resamples: int
    confidence: Number
    seed: int
    method: Literal["percentile", "BCa"]


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
