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
from typing import Any

from skilleval.errors import RejectedRequest, ServerRefusal
from skilleval.records.policy import AssistantTurn, Message, ToolCall
from skilleval.serving.engines import Engine
from skilleval.serving.http import JsonClient, Reply, api_key
from skilleval.serving.outage import RetryLedger, ServerCalls, raise_if_retryable

# Replies that refuse this request for what it holds (a prompt past the context length, a
# body the server cannot validate or take): the model's failure on the task. sglang 0.5.23
# answers 400 for both (entrypoints/openai/serving_base.py create_error_response; its
# validation handler in entrypoints/http_server.py turns FastAPI's 422 into 400). Any other
# reply outside 2xx refuses every request alike and is no evidence of the model (sglang's
# API-key middleware, utils/auth.py, answers a wrong key with 401), so it is an error,
# never an episode's end.
REQUEST_REFUSALS = frozenset({400, 413, 422})


def sampling_body(sampling: dict[str, Any], seed: int | None, engine: Engine) -> dict[str, Any]:
    """The request body's sampling fields in the answering engine's dialect: every parameter
    a server could otherwise fill from its defaults (sglang 0.5.23 from the checkpoint's
    generation_config.json, ModelConfig.get_default_sampling_params; llama.cpp from its
    own) is sent explicitly; "no top_k" as the value the engine reads as disabled."""
    top_k = sampling["top_k"]
    body: dict[str, Any] = {
        "temperature": sampling["temperature"],
        "top_p": sampling["top_p"],
        **dict(engine.neutral),
        "max_tokens": sampling["max_tokens"],
        "tool_choice": sampling["tool_choice"],
        "chat_template_kwargs": {"enable_thinking": sampling["enable_thinking"]},
    }
    if top_k is not None or engine.top_k_disabled is not None:
        body["top_k"] = engine.top_k_disabled if top_k is None else top_k
    if sampling["send_seed"] and seed is not None:
        body["seed"] = seed
    return body


# What the preflight asks: any answer will do, the body's sampling fields are the run's.
PREFLIGHT_MESSAGES: list[Message] = [
    {"role": "system", "content": "You are being checked before an evaluation."},
    {"role": "user", "content": "Reply with the word ready."},
]


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
        engine: Engine,
        seed: int | None = None,
    ) -> None:
        self.model = model
        self.api_key_env = api_key_env
        self.sampling = sampling_body(sampling, seed, engine)
        self.client = JsonClient(
            base_url,
            timeout_s,
            connections,
            headers={"Authorization": f"Bearer {api_key(api_key_env)}"},
            trust_env=sampling["trust_env"],
        )
        self.calls = ServerCalls("model", base_url, ledger, outage_budget_s)

    def preflight(self, tools: list[dict[str, Any]]) -> None:
        """One request with the run's exact sampling, model and tools before its first
        episode: a body the server refuses stops the run here, quoting the server, before
        any episode is spent on it."""
        body = {"model": self.model, "messages": PREFLIGHT_MESSAGES, "tools": tools}
        try:
            self.calls.call(lambda: self._post({**body, **self.sampling}))
        except RejectedRequest as refused:
            raise ServerRefusal(
                f"model server {self.calls.url} refuses the protocol's request before any "
                f"episode: {refused}. The request carried {sorted(self.sampling)}; fix the "
                "protocol's values (or model_server.engine, which decides how they are "
                "spelled) and run again"
            ) from None

    def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> AssistantTurn:
        body = {"model": self.model, "messages": messages, "tools": tools, **self.sampling}
        retried: list[str] = []
        response = self.calls.call(lambda: self._post(body), on_retry=retried.append)
        if not isinstance(response, dict) or not response.get("choices"):
            raise ServerRefusal(
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
            raw=message if problem is not None else None,
            resent_after_timeout=retried.count("timeout"),
        )

    def _post(self, body: dict[str, Any]) -> Any:
        response = self.client.post("/chat/completions", body)
        raise_if_retryable(response)
        if response.status in REQUEST_REFUSALS:
            raise rejected(response)
        if response.status >= 300:
            raise ServerRefusal(
                f"model server {self.calls.url} answered HTTP {response.status} to POST "
                f"/chat/completions ({response.text[:200]!r}): it refuses every request alike. "
                f"Check execution.model_server.base_url ({self.calls.url}, which must end in "
                "the API prefix such as /v1) and the key: "
                + (
                    f"${self.api_key_env} (execution.model_server.api_key_env)"
                    if self.api_key_env
                    else "none is sent (execution.model_server.api_key_env: null)"
                )
            )
        try:
            return response.json()
        except ValueError:
            raise ServerRefusal(
                f"model server {self.calls.url} answered a chat completion that is not JSON "
                f"(HTTP {response.status}): {response.text[:200]!r}; it is no "
                "OpenAI-compatible endpoint: check execution.model_server.base_url"
            ) from None


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
