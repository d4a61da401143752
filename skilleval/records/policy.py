"""What a policy exchanges with the rollout loop: OpenAI-style messages and typed turns.

Messages are plain OpenAI-style dicts so that the sim and openai policies see exactly
the same conversation; only the assistant's answer is parsed into a typed turn.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

Message = dict[str, Any]


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
    # Why tool calls were dropped (malformed arguments); None when every call parsed.
    problem: str | None = None
    # The message as the server sent it, kept where it could not be parsed (the raw text of
    # a malformed tool call), for the run's transcript.
    raw: Message | None = None
    # How often the request was sent again after the server passed the client's timeout:
    # each re-send draws a new sample, so the run reports it (a verdict checks it).
    resent_after_timeout: int = 0
    # The model the reply names (its ``model`` field); None for a policy in process.
    model: str | None = None

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
