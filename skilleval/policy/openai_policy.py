"""The policy of any OpenAI-compatible chat endpoint (sglang, vLLM, hosted APIs).

Uses the official ``openai`` client with explicit per-request timeouts and its own
retries off: the run's retry layer for this server (serving.outage) waits out 429, 5xx,
timeouts and outages, counting each. A request the server refuses (another 4xx, such as
a prompt past the context length) ends that episode as the model's failure. The API key
is read from the named environment variable only and never written anywhere.
"""

from __future__ import annotations

import json
import os
from typing import Any

import openai

from skilleval.errors import RejectedRequest, SkillevalError
from skilleval.policy.types import AssistantTurn, Message, ToolCall
from skilleval.serving.outage import RetryLedger, ServerCalls

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


# sglang's value for "no top_k" (sglang/srt/sampling/sampling_params.py: "top_k must be -1
# (disable) or at least 1"; vLLM reads -1 the same way).
TOP_K_DISABLED = -1
# The sampling parameters a server may fill from the checkpoint's generation_config.json when
# a request leaves them out (sglang 0.5.23, ModelConfig.get_default_sampling_params, applied
# by ChatCompletionRequest.to_sampling_params: request value > generation_config > OpenAI
# default). Every request sends each one, so no server default can change it; min_p and
# repetition_penalty, which the protocol does not name, go as the values that turn them off.
SERVER_DEFAULTABLE = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")
NEUTRAL = {"min_p": 0.0, "repetition_penalty": 1.0}


def sampling_body(sampling: dict[str, Any], seed: int | None) -> dict[str, Any]:
    """The request body's sampling fields, sglang's and vLLM's extensions included: every
    parameter a server could otherwise fill from the checkpoint is sent explicitly."""
    top_k = sampling["top_k"]
    body: dict[str, Any] = {
        "temperature": sampling["temperature"],
        "top_p": sampling["top_p"],
        "top_k": TOP_K_DISABLED if top_k is None else top_k,
        **NEUTRAL,
        "max_tokens": sampling["max_tokens"],
        "tool_choice": sampling["tool_choice"],
        "chat_template_kwargs": {"enable_thinking": sampling["enable_thinking"]},
    }
    if sampling["send_seed"] and seed is not None:
        body["seed"] = seed
    return body


def parse_tool_calls(message: dict[str, Any]) -> tuple[tuple[ToolCall, ...], str | None]:
    """Tool calls of a chat message; malformed arguments become an error for the model."""
    calls, problem = [], None
    for call in message.get("tool_calls") or []:
        function = call["function"]
        try:
            arguments = json.loads(function.get("arguments") or "{}")
            if not isinstance(arguments, dict):
                raise ValueError("arguments are not a JSON object")
        except ValueError as error:
            problem = f"malformed tool call {function['name']}: {error}"
            continue
        calls.append(ToolCall(call["id"], function["name"], arguments))
    return tuple(calls), problem


class OpenAIPolicy:
    def __init__(
        self,
        base_url: str,
        model: str,
        sampling: dict[str, Any],
        api_key_env: str | None,
        timeout_s: float,
        ledger: RetryLedger,
        outage_budget_s: float,
        seed: int | None = None,
    ) -> None:
        self.model = model
        self.sampling = sampling_body(sampling, seed)
        self.client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key(api_key_env),
            timeout=timeout_s,
            max_retries=0,
            http_client=openai.DefaultHttpxClient(trust_env=sampling["trust_env"]),
        )
        self.calls = ServerCalls("model", base_url, ledger, outage_budget_s)

    def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> AssistantTurn:
        # The raw post skips the SDK's per-request walk over the typed parameters, and
        # cast_to=object its construction of a typed ChatCompletion from the reply
        # (openai/_base_client.py _process_response_data returns the JSON as it came): at
        # concurrency 32 both cost more client CPU than the rest of the request.
        body = {"model": self.model, "messages": messages, "tools": tools, **self.sampling}
        try:
            response = self.calls.call(
                lambda: self.client.post("/chat/completions", cast_to=object, body=body)
            )
        except openai.APIStatusError as error:  # 4xx other than 429: the retry layer passed it
            raise rejected(error) from error
        if not isinstance(response, dict) or not response.get("choices"):
            raise SkillevalError(
                f"model server {self.calls.url} answered a chat completion without choices: "
                f"{str(response)[:300]}"
            )
        choice = response["choices"][0]
        message = choice["message"]
        calls, problem = parse_tool_calls(message)
        usage = response.get("usage") or {}
        return AssistantTurn(
            content=message.get("content") or "",
            reasoning=message.get("reasoning_content"),
            tool_calls=calls,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            finish_reason=choice.get("finish_reason") or "stop",
            problem=problem,
        )


def rejected(error: openai.APIStatusError) -> RejectedRequest:
    """The episode's end for a refused request, with the server's own message."""
    body = error.body if isinstance(error.body, dict) else {}
    detail = body.get("message") or body.get("detail") or str(error)
    message = f"HTTP {error.status_code}: {detail}"
    lowered = message.lower()
    overflow = "context length" in lowered or "context_length" in lowered
    return RejectedRequest("context_overflow" if overflow else "rejected_request", message)
