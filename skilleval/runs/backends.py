"""Choosing the policy, environment and model service implementations named in config."""

from __future__ import annotations

import json
import logging

from skilleval.checkpoints.tensors import load_policy_tensors
from skilleval.env.adapters import IDENTITY_KEY, make_adapter
from skilleval.env.contract import start_violations
from skilleval.env.guarded import GuardedAdapter
from skilleval.env.metrics import MetricContract
from skilleval.env.wire import HttpEnvironment
from skilleval.errors import InfrastructureError, OutageError, SkillevalError
from skilleval.policy.openai_policy import OpenAIPolicy
from skilleval.protocol.sections import EnvironmentSettings, ModelServer
from skilleval.records.env import Environment
from skilleval.records.policy import Policy
from skilleval.runs.inputs import RunInputs
from skilleval.serving.http import api_key
from skilleval.serving.outage import RetryLedger, ServerCalls
from skilleval.serving.service import Service
from skilleval.world.shopsim import ShopWorld, Task, catalogue_from_json
from skilleval.world.sim_policy import SimPolicy, weights_salt

log = logging.getLogger(__name__)


def make_service(
    inputs: RunInputs, server: ModelServer, outage_budget_s: float, ledger: RetryLedger
) -> Service:
    """The run's model service at ``server`` (the protocol's, or the one the run launched);
    its identity requests go through their own retry layer (``ledger``), which waits out
    a busy server up to the outage budget."""
    checkpoint_id, checkpoint_path = inputs.checkpoint_id, inputs.checkpoint_path
    if inputs.backends["policy"] == "sim":
        return Service("sim", checkpoint_id, checkpoint_path)
    calls = ServerCalls("model", server.base_url, ledger, outage_budget_s)
    key = api_key(server.api_key_env)
    return Service("openai", checkpoint_id, checkpoint_path, server.base_url, server, calls, key)


def make_policy(
    inputs: RunInputs, service: Service, ledger: RetryLedger, fault_rate: float = 0.0
) -> Policy:
    """The run's policy (backends.policy), sending the protocol's sampling."""
    backend, protocol = inputs.backends["policy"], inputs.protocol
    sampling, seed = protocol.sampling, protocol.runtime.seed
    if backend == "sim":
        tensors = load_policy_tensors(service.weights)
        return SimPolicy(
            tensors,
            temperature=sampling.temperature,
            max_tokens=sampling.max_tokens,
            enable_thinking=sampling.enable_thinking,
            salt=weights_salt(tensors),
            task_seed=seed,
            fault_rate=fault_rate,
        )
    if backend == "openai":
        execution = inputs.execution()
        assert service.base_url is not None and service.model is not None
        assert service.engine is not None, "the service is checked before the policy is made"
        return OpenAIPolicy(
            service.base_url,
            service.model,
            sampling,
            execution.model_server.api_key_env,
            execution.model_server.request_timeout_s,
            ledger,
            execution.outage_budget_s,
            connections=protocol.runtime.concurrency,
            engine=service.engine,
            seed=seed,
            on_reconnect=lambda since: service.confirm(inputs.run, "after a reconnect,", since),
        )
    raise SkillevalError(f"backends.policy = {backend!r} is unknown")


def make_environment(
    backend: str,
    catalogue: str | None,
    split_file: str,
    split: str,
    settings: EnvironmentSettings,
    ledger: RetryLedger,
    outage_budget_s: float,
    planned_adapter: str | None = None,
) -> Environment:
    """The run's environment: a built-in adapter, or a lab's (env.adapters), which must
    be the code the graph planned the run with (``planned_adapter``, its identity)."""
    if backend == "shopsim":
        if catalogue is None:
            raise SkillevalError("the simulated shop needs its catalogue; the run was given none")
        with open(catalogue) as handle:
            products = catalogue_from_json(json.load(handle), catalogue)
        with open(split_file) as handle:
            tasks = [Task.from_json(t) for t in json.load(handle)[split]]
        return ShopWorld(products, tasks)
    if backend == "http":
        return HttpEnvironment(settings.url, settings.slots, ledger, outage_budget_s)
    # A lab's adapter is given its settings as the mapping its docs show (docs/adapters.md).
    adapter = make_adapter(backend, planned_adapter, settings.model_dump())
    calls = ServerCalls("environment", settings.url, ledger, outage_budget_s)
    return GuardedAdapter(adapter, calls)


def run_environment(
    inputs: RunInputs, ledger: RetryLedger, outage_budget_s: float | None = None
) -> Environment:
    """The run's environment, retrying through ``ledger`` for the protocol's outage
    budget (or ``outage_budget_s``)."""
    return make_environment(
        inputs.backends["environment"],
        inputs.catalogue,
        inputs.split_file,
        inputs.split,
        inputs.environment(),
        ledger,
        inputs.execution().outage_budget_s if outage_budget_s is None else outage_budget_s,
        inputs.backends.get(IDENTITY_KEY),
    )


def metric_contract(inputs: RunInputs, environment: Environment | None) -> MetricContract:
    """The rewards every episode of the run must hold: the protocol's declared metrics, in
    the ranges the adapter declares (env.metrics)."""
    return MetricContract.of_protocol(
        inputs.protocol.metrics, repr(inputs.backends["environment"]), environment
    )


def undeclared_metrics(
    inputs: RunInputs, environment: Environment, contract: MetricContract
) -> str | None:
    """What a run refuses (and env check reports) when the adapter declares metrics that
    leave out one the protocol declares; None when it gives them all or declares none."""
    missing = contract.undeclared(environment)
    if not missing:
        return None
    return (
        f"the environment adapter {inputs.backends['environment']!r} declares metrics "
        f"{sorted(getattr(environment, 'metrics', {}))} but the protocol "
        f"{inputs.protocol_name!r} declares {missing[0]!r} (metrics.main and "
        f"metrics.auxiliary: {', '.join(missing)} missing); fix: give those metrics in the "
        "adapter's rewards() and metrics attribute, or run a protocol whose metrics it gives"
    )


def refuse_broken_environment(
    inputs: RunInputs, task_id: str, environment: Environment | None = None
) -> bool:
    """Refuse a run whose environment cannot list its tools or open an episode (rules 1
    and 2 of env.contract), or cannot give the protocol's metrics (rule 4), before it
    leases a card or starts a server; True once checked. An environment not reachable yet
    is no refusal (False): its server may be the one the job launches, and the run checks
    its own ``environment`` again, waiting for it, before the first episode."""
    backend = inputs.backends["environment"]
    try:
        environment = environment or run_environment(inputs, RetryLedger(), 0.0)
        contract = metric_contract(inputs, environment)
        missing = undeclared_metrics(inputs, environment, contract)
        if missing:
            raise SkillevalError(f"{missing}, so the run stops before it leases a card")
        problems = start_violations(environment, task_id, contract)
    except (InfrastructureError, OutageError) as error:
        log.info("run %s: environment not reachable before the run starts (%s)", inputs.run, error)
        return False
    if problems:
        found = "; ".join(f"{p} (fix: {p.fix})" for p in problems)
        raise SkillevalError(
            f"the environment adapter {backend!r} breaks the contract "
            f"(skilleval/env/contract.py) on task {task_id}, so the run stops before it "
            f"leases a card: {found}. Run skilleval env check for the whole contract"
        )
    return True
