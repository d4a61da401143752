"""A protocol as typed values: what the model and the environment are sent, what is
computed from their replies, and (its execution section) where the servers are, how they
are asked and started, and how long an outage is waited out.

The lowest layer that knows a protocol: the config model (config.model) is made of these
sections, and a run's job reads them as attributes down to the request (runs, policy,
serving). A protocol becomes a mapping only at the identity and params edge
(runs.inputs.protocol_evidence). The execution section is given to a model run's job as a
params entry that Snakemake never compares (workflow.snakemake_internals,
not_a_rerun_trigger); none of it is evidence.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Section(BaseModel):
    # Validators are built on first use, not at import: most jobs only unpickle a section.
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    def settings(self) -> dict[str, Any]:
        """The section as the mapping the servers' code reads (launcher, service)."""
        return self.model_dump(exclude_unset=True)


class Launch(Section):
    """How a run's job starts its own model server (backends.model_server process or
    docker)."""

    command: list[str]
    image: str
    image_archive: str | None = None
    startup_timeout_s: float
    mounts: list[str] = []
    device_requests: bool = True


class EnvironmentAccess(Section):
    url: str
    beside_run: bool = False


class ModelServerAccess(Section):
    base_url: str
    api_key_env: str | None
    request_timeout_s: float
    launch: Launch | None


class Execution(Section):
    environment: EnvironmentAccess
    model_server: ModelServerAccess
    outage_budget_s: float


# An int stays an int (its repr is in params and digests), a float a float.
Number = int | float
Split = Literal["train", "val", "test"]


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
    # One of the engines serving.engines registers (the config schema lists them).
    engine: str | None = None
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

    @property
    def declared(self) -> list[str]:
        """Every metric an episode must hold: the main one first."""
        return [self.main, *self.auxiliary]


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


class ModelServer(Served, ModelServerAccess):
    """A run's model server: what it serves (the protocol's model_server) and where it is,
    how it is asked and started (execution.model_server); ``launched`` when the run's job
    started it on leased cards."""

    launched: bool = False

    @classmethod
    def of(cls, served: Served, access: ModelServerAccess) -> ModelServer:
        return cls.model_validate({**served.model_dump(), **access.model_dump()})


class EnvironmentSettings(EnvironmentCapacity, EnvironmentAccess):
    """What an environment adapter is made with: the protocol's slots and options, with
    its server's url and beside_run (execution.environment)."""

    @classmethod
    def of(cls, capacity: EnvironmentCapacity, access: EnvironmentAccess) -> EnvironmentSettings:
        return cls.model_validate({**capacity.model_dump(), **access.model_dump()})
