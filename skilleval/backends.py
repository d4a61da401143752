"""Choosing the policy, environment and model service implementations named in config."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from skilleval.checkpoints import load_policy_tensors
from skilleval.env.wire import HttpEnvironment
from skilleval.errors import SkillevalError
from skilleval.policy.openai_policy import OpenAIPolicy
from skilleval.policy.sim import SimPolicy, weights_salt
from skilleval.serving import Service
from skilleval.types import Environment, Policy
from skilleval.world.shopsim import ShopWorld, Task, catalogue_from_json

if TYPE_CHECKING:
    from skilleval.inputs import RunInputs


def make_service(inputs: RunInputs) -> Service:
    server = inputs.protocol["model_server"]
    if inputs.backends["policy"] == "sim":
        return Service("sim", inputs.checkpoint_id, inputs.checkpoint_path)
    return Service("openai", inputs.checkpoint_id, inputs.checkpoint_path,
                   server["base_url"], server)  # fmt: skip


def make_policy(inputs: RunInputs, service: Service, fault_rate: float = 0.0) -> Policy:
    sampling = inputs.protocol["sampling"]
    runtime = inputs.protocol["runtime"]
    if inputs.backends["policy"] == "sim":
        tensors = load_policy_tensors(service.weights)
        return SimPolicy(
            tensors,
            temperature=sampling["temperature"],
            max_tokens=sampling["max_tokens"],
            enable_thinking=sampling["enable_thinking"],
            salt=weights_salt(tensors),
            task_seed=runtime["seed"],
            fault_rate=fault_rate,
        )
    if inputs.backends["policy"] == "openai":
        server = inputs.protocol["model_server"]
        return OpenAIPolicy(
            server["base_url"],
            service.served_model(),
            sampling,
            server["api_key_env"],
            server["request_timeout_s"],
            server["max_retries"],
            seed=runtime["seed"],
        )
    raise SkillevalError(f"backends.policy = {inputs.backends['policy']!r} is unknown")


def make_environment(inputs: RunInputs) -> Environment:
    if inputs.backends["environment"] == "shopsim":
        with open(inputs.catalogue) as handle:
            catalogue = catalogue_from_json(json.load(handle))
        with open(inputs.split_file) as handle:
            tasks = [Task.from_json(t) for t in json.load(handle)[inputs.split]]
        return ShopWorld(catalogue, tasks)
    if inputs.backends["environment"] == "http":
        env = inputs.protocol["environment"]
        return HttpEnvironment(env["url"], env["slots"])
    raise SkillevalError(f"backends.environment = {inputs.backends['environment']!r} is unknown")
