"""Plain descriptions of what a run reads, shared by the workflow and the package.

Kept free of heavy imports: rules/common.smk imports it when the workflow is parsed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from skilleval.protocol.sections import (
    EnvironmentSettings,
    Execution,
    ModelServer,
    Protocol,
)
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
# What a job's protocol says in place of its description: wording, which changes no
# result, so it is no input of the run and never reaches the job.
NOT_GIVEN = "(wording: not an input of the run)"


def protocol_evidence(protocol: Protocol | Mapping[str, Any]) -> dict[str, Any]:
    """The protocol's values that reach evidence: what the model and the environment are
    sent and what is computed from their replies, without its description, file paths
    (compared by content elsewhere) and execution section. The one place a typed protocol
    becomes a mapping: identities, digests and params hash this."""
    written = protocol.settings() if isinstance(protocol, Protocol) else protocol
    values = {k: v for k, v in written.items() if k not in ("prompt", EXECUTION, "description")}
    if "tasks" in written:
        values["tasks"] = {k: v for k, v in written["tasks"].items() if k != "split_file"}
    return values


def protocol_digest(name: str, protocol: Protocol | Mapping[str, Any]) -> str:
    """The protocol's identity: its name and the values that reach evidence. Shown beside
    its name in every table, and registered for a frozen protocol."""
    return canonical_hash({"name": name, **protocol_evidence(protocol)})


@dataclass(frozen=True)
class RunInputs:
    """Everything an evaluation run reads, resolved from config by the workflow."""

    run: str
    experiment: str
    protocol_name: str
    protocol: Protocol
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
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values["protocol"] = protocol_evidence(self.protocol)
        for field in FILE_FIELDS.values():
            values.pop(field)
        return values

    @classmethod
    def from_settings(
        cls, settings: Mapping[str, Any], files: Mapping[str, str], execution: Execution
    ) -> RunInputs:
        """The inputs of a job: its settings, with the paths of the files it was given and
        the execution section (a params entry that is no rerun trigger, so that changing
        it re-runs nothing)."""
        paths: dict[str, Any] = {field: files.get(role) for role, field in FILE_FIELDS.items()}
        given = settings["protocol"]
        protocol = Protocol.model_validate(
            {
                **given,
                "description": NOT_GIVEN,
                "tasks": {**given["tasks"], "split_file": paths["split_file"]},
                "prompt": {
                    "system": paths["system_prompt_file"],
                    "skill_template": paths["skill_template_file"],
                },
                EXECUTION: execution,
            }
        )
        return cls(**{**settings, "protocol": protocol}, **paths)

    def executed_with(self, execution: Execution) -> RunInputs:
        """These inputs with another execution section (where the servers are now)."""
        return replace(self, protocol=self.protocol.model_copy(update={EXECUTION: execution}))

    def execution(self) -> Execution:
        return self.protocol.execution

    def model_server(self) -> ModelServer:
        """The run's model server: what it serves (the protocol's model_server) and where it
        is, how it is asked and started (execution.model_server)."""
        return ModelServer.of(self.protocol.model_server, self.execution().model_server)

    def environment(self) -> EnvironmentSettings:
        """The settings an environment adapter is made with: slots and options, with the
        server's url and beside_run (execution.environment)."""
        return EnvironmentSettings.of(self.protocol.environment, self.execution().environment)
