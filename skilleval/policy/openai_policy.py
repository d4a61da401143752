"""The policy of any OpenAI-compatible chat endpoint (sglang, vLLM, hosted APIs).

Posts the chat-completions request through the package's one HTTP client
(serving.http), with explicit per-request timeouts and no retries of its own: the run's
retry layer for this server (serving.outage) waits out 429, 5xx, timeouts and outages,
counting each. A request the server refuses for what it holds (400, 413, 422: a prompt
past the context length) ends that episode as the model's failure; a reply that refuses
every request alike (401, 404, a redirect) is an error. The API key is read from the
named environment variable only, sent as the bearer token that the OpenAI API and
sglang's and vLLM's ``--api-key`` check, and never written anywhere.

The official ``openai`` SDK is not used: a run sends one request shape and reads its reply
as JSON, and at concurrency 32 the SDK's request path (its typed options, its own httpx
copy) and its import cost more client CPU than the rest of the request.
"""

from __future__ import annotations

import json
import os
from typing import Any

from skilleval.errors import RejectedRequest, SkillevalError
from skilleval.policy.types import AssistantTurn, Message, ToolCall
from skilleval.serving.http import JsonClient, Reply
from skilleval.serving.outage import RetryLedger, ServerCalls, raise_if_retryable

LOCAL_KEY = "EMPTY"  # what a local server started without --api-key ignores
# Replies that refuse this request for what it holds (a prompt past the context length, a
# body the server cannot validate or take): the model's failure on the task. sglang 0.5.23
# answers 400 for both (entrypoints/openai/serving_base.py create_error_response; its
# validation handler in entrypoints/http_server.py turns FastAPI's 422 into 400). Any other
# reply outside 2xx refuses every request alike and is no evidence of the model (sglang's
# API-key middleware, utils/auth.py, answers a wrong key with 401), so it is an error,
# never an episode's end.
REQUEST_REFUSALS = frozenset({400, 413, 422})


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
        connections: int,
        seed: int | None = None,
    ) -> None:
        self.model = model
        self.sampling = sampling_body(sampling, seed)
        self.client = JsonClient(
            base_url,
            timeout_s,
            connections,
            headers={"Authorization": f"Bearer {api_key(api_key_env)}"},
            trust_env=sampling["trust_env"],
        )
        self.calls = ServerCalls("model", base_url, ledger, outage_budget_s)

    def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> AssistantTurn:
        body = {"model": self.model, "messages": messages, "tools": tools, **self.sampling}
        response = self.calls.call(lambda: self._post(body))
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

    def _post(self, body: dict[str, Any]) -> Any:
        response = self.client.post("/chat/completions", body)
        raise_if_retryable(response)
        if response.status in REQUEST_REFUSALS:
            raise rejected(response)
        if response.status >= 300:
            raise SkillevalError(
                f"model server {self.calls.url} answered HTTP {response.status} to "
                f"POST /chat/completions: {response.text[:300]!r}; check "
                "model_server.base_url and api_key_env of the protocol"
            )
        try:
            return response.json()
        except ValueError as error:
            raise SkillevalError(
                f"model server {self.calls.url} answered a chat completion that is not JSON "
                f"(HTTP {response.status}): {response.text[:300]!r}"
            ) from error


def rejected(response: Reply) -> RejectedRequest:
    """The episode's end for a refused request, with the server's own message: the OpenAI
    API's ``{"error": {"message"}}``, sglang's and vLLM's ``{"message"}``, or FastAPI's
    ``{"detail"}``; the reply's text where it is none of these."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        body = body["error"]
    found = body.get("message") or body.get("detail") if isinstance(body, dict) else None
    detail = found or response.text[:300] or "no message"
    message = f"HTTP {response.status}: {detail}"
    lowered = message.lower()
    overflow = "context length" in lowered or "context_length" in lowered
    return RejectedRequest("context_overflow" if overflow else "rejected_request", message)
