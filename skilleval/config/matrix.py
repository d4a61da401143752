"""The ablation matrix (config/ablation/matrix.yaml) as typed values.

Its JSON schema (schemas/ablation.schema.yaml) checks the file and words the errors, and
ablation.checks holds the rules between keys; what passed both becomes a :class:`Matrix`.
The models mirror the schema key for key (tests/test_config_model.py holds them to it).
Trainer overrides stay mappings of dotted keys: they are the trainer's own config, which
run identities hash as written (:meth:`Section.settings` gives a section back so).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from skilleval.config.model import SplitSizes
from skilleval.protocol.sections import Number, Section

# A YAML key or value keeps its type (8 stays an int, "8" a string): run ids, params and
# identities are made from them.
Scalar = str | int | float | bool | None
Overrides = dict[str, Scalar]
Failure = Literal[
    "empty_responses",
    "rate_limit",
    "traceback",
    "oom",
    "before_fix",
    "wrong_skill",
    "undeclared_override",
]


class LogLines(Section):
    train_size: str | None = None
    batch_sizes: str | None = None
    start: str | None = None


class Contract(Section):
    results_file: str | None = None
    config_file: str | None = None
    log_files: list[str] | None = None
    log_head_lines: int | None = None
    log_lines: LogLines | None = None
    config_keys: dict[str, str] | None = None


class Trainer(Section):
    kind: Literal["sim", "command"]
    python: str
    root: str
    script: str
    seed: int
    contract: Contract = Field(default_factory=Contract)
    plant: dict[str, Failure]


class Benchmark(Section):
    config: str
    split_dir: str
    sizes: SplitSizes
    pool: int | None
    ratio_train: dict[str, int] | None = None
    max_tokens: int
    verified_batches: dict[int, list[int]] = Field(default_factory=dict)
    memory_heavy: bool
    prior_default: bool


class Group(Section):
    prefix: str
    section: Literal["3.1", "3.2", "3.4", "3.5"]
    benchmarks: list[str]
    fixed: Overrides = Field(default_factory=dict)
    axis: str | None = None
    values: dict[int | str, Overrides]


class HarnessBenchmark(Section):
    benchmark: str
    skill_init: str
    split_dir: str
    env: Overrides
    full_batch: int
    suffix: str


class Step(BaseModel):
    """A harness step; no Section, whose settings() its ``settings`` key would hide."""

    model_config = Section.model_config
    backend: str
    mirror: str | None = None
    settings: dict[str, list[str]] | None = None


class Harness(Section):
    fixed: Overrides
    backends: dict[str, str]
    benchmarks: dict[str, HarnessBenchmark]
    steps: dict[str, Step]
    never_run: list[str]


class Fix(Section):
    name: str
    benchmarks: list[str]
    fixed_at: str


class InvalidRules(Section):
    max_empty_response_fraction: Number
    rate_limit_pattern: str
    crash_pattern: str
    fixes: list[Fix]


class Launch(Section):
    api_bound_total: int
    memory_heavy_total: int


class Matrix(Section):
    trainer: Trainer
    default: Overrides
    benchmarks: dict[str, Benchmark]
    groups: dict[str, Group]
    harness: Harness
    invalid_rules: InvalidRules
    launch: Launch
