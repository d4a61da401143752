"""Choosing the policy and environment implementations named in config."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from skilleval.checkpoints import checkpoint_fingerprint, load_policy_tensors
from skilleval.errors import SkillevalError
from skilleval.policy.sim import SimPolicy
from skilleval.types import Environment, Policy
from skilleval.world.shopsim import ShopWorld, Task, catalogue_from_json

if TYPE_CHECKING:
    from skilleval.inputs import RunInputs


@dataclass(frozen=True)
class Service:
    """The model service a run talks to; its identity is recorded at start and end."""

    backend: str
    checkpoint_id: str
    checkpoint_path: str

    @classmethod
    def for_inputs(cls, inputs: RunInputs, _fingerprint: str) -> Service:
        return cls(inputs.backends["policy"], inputs.checkpoint_id, inputs.checkpoint_path)

    def identity(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "checkpoint_id": self.checkpoint_id,
            "model_path": self.checkpoint_path,
            "weights_fingerprint": checkpoint_fingerprint(self.checkpoint_path),
        }


def make_policy(inputs: RunInputs, service: Service, salt: str, fault_rate: float = 0.0) -> Policy:
    sampling = inputs.protocol["sampling"]
    if inputs.backends["policy"] == "sim":
        return SimPolicy(
            load_policy_tensors(service.checkpoint_path),
            temperature=sampling["temperature"],
            max_tokens=sampling["max_tokens"],
            enable_thinking=sampling["enable_thinking"],
            salt=salt,
            task_seed=inputs.protocol["runtime"]["seed"],
            fault_rate=fault_rate,
        )
    raise SkillevalError(f"backends.policy = {inputs.backends['policy']!r} is not available yet")


def make_environment(inputs: RunInputs, task_ids: list[str]) -> Environment:
    if inputs.backends["environment"] == "shopsim":
        with open(inputs.catalogue) as handle:
            catalogue = catalogue_from_json(json.load(handle))
        with open(inputs.split_file) as handle:
            tasks = [Task.from_json(t) for t in json.load(handle)[inputs.split]]
        return ShopWorld(catalogue, tasks)
    raise SkillevalError(
        f"backends.environment = {inputs.backends['environment']!r} is not available yet"
    )
