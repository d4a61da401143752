"""A protocol's execution section as typed values: where its servers are, how they are
asked and started, and how long an outage is waited out.

Part of the typed config (model.py). A model run's job is given its protocol's section as
a params entry that Snakemake never compares (workflow.snakemake_internals,
not_a_rerun_trigger; runs.inputs.RunInputs.executed_with). None of it is evidence:
runs.inputs.results_protocol leaves the whole section out.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


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
