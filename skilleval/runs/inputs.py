"""Plain descriptions of what a run reads, shared by the workflow and the package.

Kept free of heavy imports: rules/common.smk imports it when the workflow is parsed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from skilleval.config.execution import Execution
from skilleval.storage.hashing import canonical_hash

# The files a run reads: role (as the rules name its inputs) -> RunInputs field. Their
# paths are no part of what a run computes; their contents are compared by digest.
FILE_FIELDS = {
    "checkpoint": "checkpoint_path",
    "split_file": "split_file",
    "bank": "bank_path",
    "design": "mask_path",
    "catalogue": "catalogue",
    "system_prompt": "system_prompt_file",
    "skill_template": "skill_template_file",
}

# The protocol section that says where a run finds its servers, how long it waits for
# them and how a launched server is started: none of it can change a result (what a
# server serves is checked by its identity), so it reaches no params, identity or digest,
# and a run stopped by an outage resumes after its budget is raised or its server moved.
EXECUTION = "execution"


def protocol_evidence(protocol: Mapping[str, Any]) -> dict[str, Any]:
    """The protocol's values that reach evidence: what the model and the environment are
    sent and what is computed from their replies, without its description, file paths
    (compared by content elsewhere) and execution section."""
    return {k: v for k, v in results_protocol(protocol).items() if k != "description"}


def results_protocol(protocol: Mapping[str, Any]) -> dict[str, Any]:
    """The protocol's values that decide what a run computes. The paths of the split file
    and the prompt files are no such values (the run reads those files as inputs and
    compares them by content), nor is its execution section."""
    values = {k: v for k, v in protocol.items() if k not in ("prompt", EXECUTION)}
    if "tasks" in protocol:
        values["tasks"] = {k: v for k, v in protocol["tasks"].items() if k != "split_file"}
    return values


def protocol_digest(name: str, protocol: Mapping[str, Any]) -> str:
    """The protocol's identity: its name and the values that reach evidence. Shown beside
    its name in every table, and registered for a frozen protocol."""
    return canonical_hash({"name": name, **protocol_evidence(protocol)})


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
    catalogue: str | None
    system_prompt_file: str
    skill_template_file: str
    mask_path: str | None = None
    mask_run: str | None = None

    def for_results(self) -> RunInputs:
        """These inputs without the settings that only decide how the run is executed."""
        return replace(self, protocol=results_protocol(self.protocol))

    def files(self) -> dict[str, str]:
        """The files the run reads, by role; the catalogue only where the simulated shop
        is the environment."""
        found = {role: getattr(self, field) for role, field in FILE_FIELDS.items()}
        if self.backends["environment"] != "shopsim":
            found.pop("catalogue")
        return {role: path for role, path in found.items() if path}

    def settings(self) -> dict[str, Any]:
        """What the run computes with apart from its files: the graph compares these, and
        each file by its content digest, so a copy under another path changes nothing."""
        values = asdict(self.for_results())
        for field in FILE_FIELDS.values():
            values.pop(field)
        return values

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any], files: Mapping[str, str]) -> RunInputs:
        """The inputs of a job: its settings with the paths of the files it was given."""
        paths: dict[str, Any] = {field: files.get(role) for role, field in FILE_FIELDS.items()}
        return cls(**settings, **paths)

    def executed_with(self, execution: Execution) -> RunInputs:
        """These inputs with the execution section the job was given now (a params entry
        that is no rerun trigger, so that changing it re-runs nothing)."""
        return replace(self, protocol={**self.protocol, EXECUTION: execution.settings()})

    def execution(self) -> Execution:
        """The protocol's execution section, typed."""
        return Execution.model_validate(self.protocol[EXECUTION])

    def model_server(self) -> dict[str, Any]:
        """The run's model server: what it serves (the protocol's model_server) and where it
        is, how it is asked and started (execution.model_server)."""
        return {**self.protocol["model_server"], **self.execution().model_server.settings()}

    def environment(self) -> dict[str, Any]:
        """The settings an environment adapter is made with: slots and options, with the
        server's url and beside_run (execution.environment)."""
        return {**self.protocol["environment"], **self.execution().environment.settings()}
