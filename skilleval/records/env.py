"""What an environment backend offers the rollout loop: episodes stepped by tool calls."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from skilleval.records.policy import ToolCall


@dataclass(frozen=True)
class StepResult:
    observation: str
    done: bool


class EpisodeHandle(Protocol):
    @property
    def instruction(self) -> str: ...

    def step(self, call: ToolCall) -> StepResult: ...

    def rewards(self) -> dict[str, float]: ...

    def close(self) -> None: ...


class Environment(Protocol):
    def tools(self) -> list[dict[str, Any]]: ...

    def start(self, task_id: str) -> EpisodeHandle: ...
