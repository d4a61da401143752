"""The rollout loop shared by every policy and environment backend.

Messages in, an assistant turn out, tool results back, until the environment says the
episode is over, the model stops calling tools, or ``max_steps`` turns have been taken.
Every episode ends with one of END_REASONS; all but done, no_tool_call, max_steps and
timeout carry an error naming what the model (or its server) did wrong. An episode that
passes the protocol's deadline (if it sets one) ends before its next model turn and is
scored as it stands, like one that reached max_steps: never resampled.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from skilleval.errors import RejectedRequest
from skilleval.records.env import Environment, EpisodeHandle
from skilleval.records.policy import AssistantTurn, Message, Policy
from skilleval.storage.records import versioned

END_REASONS = (
    "done",
    "no_tool_call",
    "max_steps",
    "max_tokens",
    "malformed_tool_call",
    "unknown_tool",
    "context_overflow",
    "rejected_request",
    "timeout",
)


@dataclass(frozen=True)
class EpisodeResult:
    task_id: str
    repeat: int
    rewards: dict[str, float]
    steps: int
    prompt_tokens: int
    completion_tokens: int
    stop_reason: str
    error: str | None
    # The conversation as exchanged, with the raw text of replies that could not be parsed
    # (runs.transcripts): kept with the record, never part of the results.
    transcript: list[Message] = field(default_factory=list)
    # Model requests sent again after the client's timeout, each a new sample.
    resent_after_timeout: int = 0
    # The models the episode's replies named, and what answered it (runs.answered).
    reply_models: tuple[str, ...] = ()
    answered: dict[str, Any] | None = None

    def journal_line(self) -> dict[str, Any]:
        """The record and its transcript, as the journal keeps them."""
        return {**self.as_record(), "transcript": self.transcript}

    def as_record(self) -> dict[str, Any]:
        return versioned(
            "task_record",
            {
                "task_id": self.task_id,
                "repeat": self.repeat,
                **self.rewards,
                "steps": self.steps,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "tokens": self.prompt_tokens + self.completion_tokens,
                "stop_reason": self.stop_reason,
                "error": self.error,
                "resent_after_timeout": self.resent_after_timeout,
                **({"answered": self.answered} if self.answered is not None else {}),
            },
        )


def run_episode(
    policy: Policy,
    environment: Environment,
    task_id: str,
    system_prompt: str,
    max_steps: int,
    repeat: int = 0,
    deadline_s: float | None = None,
) -> EpisodeResult:
    started = time.monotonic()
    episode = environment.start(task_id)
    tools = environment.tools()
    messages: list[Message] = [
        {"role": "system", "content": system_prompt},
        {"role": "user", "content": episode.instruction},
    ]
    transcript: list[Message] = [dict(message) for message in messages]
    tool_names = {tool["function"]["name"] for tool in tools}
    turns: list[AssistantTurn] = []
    stop_reason, error = "max_steps", None
    try:
        while len(turns) < max_steps:
            if deadline_s is not None and time.monotonic() - started >= deadline_s:
                stop_reason = "timeout"
                break
            try:
                turn = policy.complete(messages, tools)
            except RejectedRequest as refused:
                stop_reason, error = refused.reason, str(refused)
                break
            turns.append(turn)
            messages.append(turn.as_message())
            transcript.append(turn.raw if turn.raw is not None else turn.as_message())
            ended = turn_end(turn, tool_names)
            if ended is not None:
                stop_reason, error = ended
                break
            if run_tool_calls(episode, turn, (messages, transcript)):
                stop_reason = "done"
                break
        rewards = episode.rewards()
    finally:
        episode.close()
    return EpisodeResult(
        task_id,
        repeat,
        rewards,
        len(turns),
        sum(turn.prompt_tokens for turn in turns),
        sum(turn.completion_tokens for turn in turns),
        stop_reason,
        error,
        transcript,
        sum(turn.resent_after_timeout for turn in turns),
        tuple(dict.fromkeys(turn.model for turn in turns if turn.model is not None)),
    )


def run_tool_calls(
    episode: EpisodeHandle, turn: AssistantTurn, conversations: tuple[list[Message], ...]
) -> bool:
    """Each of the turn's tool calls in order, its result appended to each conversation;
    True once the environment says the episode is over."""
    for call in turn.tool_calls:
        result = episode.step(call)
        reply = {"role": "tool", "tool_call_id": call.id, "content": result.observation}
        for conversation in conversations:
            conversation.append(reply)
        if result.done:
            return True
    return False


def turn_end(turn: AssistantTurn, tool_names: set[str]) -> tuple[str, str | None] | None:
    """(end reason, error) when this turn ends the episode; None when its calls are run."""
    if not turn.tool_calls:
        if turn.problem is not None:
            return "malformed_tool_call", turn.problem
        if turn.finish_reason == "length":
            return "max_tokens", truncated(turn)
        return "no_tool_call", None
    unknown = sorted({call.name for call in turn.tool_calls} - tool_names)
    if unknown:
        return "unknown_tool", f"unknown tool(s) {unknown}; the tools are {sorted(tool_names)}"
    return None


def truncated(turn: AssistantTurn) -> str:
    """Why a turn cut at max_tokens ended the episode: what it had written by then (a long
    answer or reasoning cut short is no empty response)."""
    written = {"text": len(turn.content or ""), "reasoning": len(turn.reasoning or "")}
    said = [f"{n} characters of {what}" for what, n in written.items() if n]
    if not said:
        return "empty response: completion hit max_tokens"
    return f"truncated: completion hit max_tokens after {' and '.join(said)}, with no tool call"
