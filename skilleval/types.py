"""Wire-level types shared by every policy and environment backend.

Messages are plain OpenAI-style dicts so that the sim and openai policies see exactly
the same conversation; only the assistant's answer is parsed into a typed turn.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

Message = dict[str, Any]


class InfrastructureError(Exception):
    """A failure of the machinery (timeout, 429, 5xx, lost slot), never a task failure.

    Episodes that raise it are retried with backoff and never scored.
    """

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class AssistantTurn:
    content: str
    reasoning: str | None
    tool_calls: tuple[ToolCall, ...]
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str

    def as_message(self) -> Message:
        message: Message = {"role": "assistant", "content": self.content}
        if self.reasoning is not None:
            message["reasoning_content"] = self.reasoning
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                }
                for call in self.tool_calls
            ]
        return message


class Policy(Protocol):
    """A model: the conversation so far in, one assistant turn out."""

    def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> AssistantTurn: ...


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


@dataclass(frozen=True)
class Skill:
    """One chunk of a skill bank."""

    chunk_id: str
    text: str
    hints: tuple[dict[str, Any], ...] = field(default=())
