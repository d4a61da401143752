"""Every environment adapter keeps the rollout loop's contract (skilleval/env/contract.py):
the built-in world in process and the HTTP client against the project's server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from skilleval.env.contract import contract_violations
from skilleval.env.wire import HttpEnvironment
from skilleval.records.env import Environment, EpisodeHandle, StepResult
from skilleval.records.policy import ToolCall
from skilleval.runs.backends import make_environment
from skilleval.serving.outage import RetryLedger
from skilleval.world.server import start_servers


def task_ids(world: Path) -> list[str]:
    tasks = json.loads((world / "persona_splits.v1.json").read_text())["val"]
    return [task["task_id"] for task in tasks[:3]]


def in_process(world: Path) -> Environment:
    """The built-in world's val split, as a run's shopsim backend opens it."""
    catalogue, split_file = str(world / "catalogue.json"), str(world / "persona_splits.v1.json")
    return make_environment("shopsim", catalogue, split_file, "val", {}, RetryLedger(), 60.0)


@pytest.fixture(params=["shopsim", "http"])
def adapter(request: pytest.FixtureRequest, small_world: Path) -> Iterator[Environment]:
    if request.param == "shopsim":
        yield in_process(small_world)
        return
    weights = small_world / "checkpoints" / "base" / "model.safetensors"
    servers = start_servers(str(weights), str(small_world), 1)
    try:
        yield HttpEnvironment(servers.env_url, 8, RetryLedger(), 60.0)
    finally:
        servers.shutdown()


def test_every_shipped_adapter_keeps_the_contract(adapter: Environment, small_world: Path) -> None:
    assert contract_violations(adapter, task_ids(small_world)) == []


class RaisingOnUnknownTools:
    """An adapter that breaks rule 3: it raises for a tool it does not know."""

    def __init__(self, inner: Environment) -> None:
        self.inner = inner

    def tools(self) -> list[dict[str, object]]:
        return self.inner.tools()

    def start(self, task_id: str) -> EpisodeHandle:
        episode = self.inner.start(task_id)
        known = {t["function"]["name"] for t in self.inner.tools()}

        class Strict:
            instruction = episode.instruction
            rewards = staticmethod(episode.rewards)
            close = staticmethod(episode.close)

            @staticmethod
            def step(call: ToolCall) -> StepResult:
                if call.name not in known:
                    raise KeyError(call.name)
                return episode.step(call)

        return Strict()


def test_the_contract_check_catches_an_adapter_that_raises(small_world: Path) -> None:
    problems = contract_violations(
        RaisingOnUnknownTools(in_process(small_world)), task_ids(small_world)
    )
    assert problems and all("raised KeyError" in str(p) for p in problems)
    assert {p.rule for p in problems} == {3}  # step answers a model's mistake, never raises
