"""The policy of any OpenAI-compatible chat endpoint (sglang, vLLM, hosted APIs).

Uses the official ``openai`` client: explicit per-request timeouts and its retries with
exponential backoff on 429, 5xx, timeouts and connection errors, which honour the
server's Retry-After. What still fails after them is an InfrastructureError, so the
runner retries the episode and never scores it. The API key is read from the named
environment variable only and never written anywhere.
"""

from __future__ import annotations

import json
import os
from typing import Any

import openai

from skilleval.errors import InfrastructureError, SkillevalError
from skilleval.policy.types import AssistantTurn, Message, ToolCall

LOCAL_KEY = "EMPTY"  # sglang and vLLM accept any key; the client needs a non-empty one


def api_key(env_name: str | None) -> str:
    if env_name is None:
        return LOCAL_KEY
    key = os.environ.get(env_name)
    if not key:
        raise SkillevalError(
            f"the protocol reads its API key from ${env_name}, which is not set; export it "
            "in the shell that runs snakemake (it is never written to config or results)"
        )
    return key


def sampling_arguments(sampling: dict[str, Any], seed: int | None) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "temperature": sampling["temperature"],
        "top_p": sampling["top_p"],
        "max_tokens": sampling["max_tokens"],
        "tool_choice": sampling["tool_choice"],
    }
    extra: dict[str, Any] = {
        "chat_template_kwargs": {"enable_thinking": sampling["enable_thinking"]}
    }
    if sampling["top_k"] is not None:
        extra["top_k"] = sampling["top_k"]
    if sampling["send_seed"] and seed is not None:
        arguments["seed"] = seed
    arguments["extra_body"] = extra
    return arguments


def parse_tool_calls(message: Any) -> tuple[tuple[ToolCall, ...], str | None]:
    """Tool calls of a chat message; malformed arguments become an error for the model."""
    calls, problem = [], None
    for call in message.tool_calls or []:
        try:
            arguments = json.loads(call.function.arguments or "{}")
            if not isinstance(arguments, dict):
                raise ValueError("arguments are not a JSON object")
        except ValueError as error:
            problem = f"malformed tool call {call.function.name}: {error}"
            continue
        calls.append(ToolCall(call.id, call.function.name, arguments))
    return tuple(calls), problem


class OpenAIPolicy:
    def __init__(
        self,
        base_url: str,
        model: str,
        sampling: dict[str, Any],
        api_key_env: str | None,
        timeout_s: float,
        max_retries: int,
        seed: int | None = None,
    ) -> None:
        self.model = model
        self.arguments = sampling_arguments(sampling, seed)
        self.client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key(api_key_env),
            timeout=timeout_s,
            max_retries=max_retries,
            http_client=openai.DefaultHttpxClient(trust_env=sampling["trust_env"]),
        )

    def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> AssistantTurn:
        try:
            create: Any = self.client.chat.completions.create
            response = create(model=self.model, messages=messages, tools=tools, **self.arguments)
        except (
            openai.APIConnectionError,
            openai.APITimeoutError,
            openai.RateLimitError,
            openai.InternalServerError,
        ) as error:
            raise InfrastructureError(f"{type(error).__name__}: {error}") from error
        except openai.APIStatusError as error:
            if error.status_code >= 500 or error.status_code == 429:
                raise InfrastructureError(f"HTTP {error.status_code}: {error}") from error
            raise
        choice = response.choices[0]
        message = choice.message
        calls, problem = parse_tool_calls(message)
        reasoning = getattr(message, "reasoning_content", None)
        usage = response.usage
        content = message.content or ""
        if problem and not calls:
            content = f"{content}\n[{problem}]".strip()
        return AssistantTurn(
            content=content,
            reasoning=reasoning,
            tool_calls=calls,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            finish_reason=choice.finish_reason or "stop",
        )
