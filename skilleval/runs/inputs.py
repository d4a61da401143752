"""Plain descriptions of what a run reads, shared by the workflow and the package.

Kept free of heavy imports: rules/common.smk imports it when the workflow is parsed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

# How a run is executed, not what it computes: these never change a fingerprint or make a
# run stale, so a run stopped by an outage resumes after the budget is raised.
EXECUTION_ONLY_RUNTIME = ("outage_budget_s",)


def results_protocol(protocol: Mapping[str, Any]) -> dict[str, Any]:
    """The protocol's values that decide what a run computes."""
    runtime = {k: v for k, v in protocol["runtime"].items() if k not in EXECUTION_ONLY_RUNTIME}
    return {**protocol, "runtime": runtime}


@dataclass(frozen=True)
class RunInputs:
    """Everything an evaluation run reads, resolved from config by the workflow."""

    run: str
    experiment: str
    protocol_name: str
    protocol: dict[str, Any]
    checkpoint_id: str
    checkpoint_path: str
    checkpoint_expected_fingerprint: str | None
    bank_name: str | None
    bank_path: str | None
    bank_chunks: int | None
    split_file: str
    split: str
    backends: dict[str, str]
    catalogue: str
    mask_path: str | None = None
    mask_run: str | None = None

    def for_results(self) -> RunInputs:
        """These inputs without the settings that only decide how the run is executed."""
        return replace(self, protocol=results_protocol(self.protocol))

    def executed_with(self, config: Mapping[str, Any]) -> RunInputs:
        """These inputs with the execution-only settings the config holds now (a job gets
        them from the config, not from params, so that changing them re-runs nothing)."""
        runtime = config["protocols"][self.protocol_name]["runtime"]
        executed = {k: runtime[k] for k in EXECUTION_ONLY_RUNTIME}
        protocol = {**self.protocol, "runtime": {**self.protocol["runtime"], **executed}}
        return replace(self, protocol=protocol)
