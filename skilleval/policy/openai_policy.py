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
import time
from collections.abc import Callable
from typing import Any

from skilleval.errors import RejectedRequest, ServerRefusal
from skilleval.protocol.sections import Sampling
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
# Failures after which the reply may come from another server process (a restart): what
# answers is read again before the reply is taken (serving.service.Service.confirm).
RECONNECTS = frozenset({"connect", "transport", "5xx"})


def sampling_body(sampling: Sampling, seed: int | None, engine: Engine) -> dict[str, Any]:
    """The request body's sampling fields in the answering engine's dialect: every parameter
    a server could otherwise fill from its defaults (sglang 0.5.23 from the checkpoint's
    generation_config.json, ModelConfig.get_default_sampling_params; llama.cpp from its
    own) is sent explicitly; "no top_k" as the value the engine reads as disabled."""
    top_k = sampling.top_k
    body: dict[str, Any] = {
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        **dict(engine.neutral),
        "max_tokens": sampling.max_tokens,
        "tool_choice": sampling.tool_choice,
        "chat_template_kwargs": {"enable_thinking": sampling.enable_thinking},
    }
    if top_k is not None or engine.top_k_disabled is not None:
        body["top_k"] = engine.top_k_disabled if top_k is None else top_k
    if sampling.send_seed and seed is not None:
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
        sampling: Sampling,
        api_key_env: str | None,
        timeout_s: float,
        ledger: RetryLedger,
        outage_budget_s: float,
        connections: int,
        engine: Engine,
        seed: int | None = None,
        on_reconnect: Callable[[float], None] | None = None,
    ) -> None:
        """``on_reconnect``: called, with the time the last re-send went out, before a reply
        that came after a reconnect is taken."""
        self.model = model
        self.on_reconnect = on_reconnect
        self.api_key_env = api_key_env
        self.sampling = sampling_body(sampling, seed, engine)
        self.client = JsonClient(
            base_url,
            timeout_s,
            connections,
            headers={"Authorization": f"Bearer {api_key(api_key_env)}"},
            trust_env=sampling.trust_env,
        )
        self.calls = ServerCalls("model", base_url, ledger, outage_budget_s)
        ledger.on_halt(self.client.abort)

    def preflight(self, tools: list[dict[str, Any]]) -> dict[str, Any]:
        """One request with the run's exact sampling, model and tools before its first
        episode: a body the server refuses stops the run here, quoting the server, before
        any episode is spent on it. Then the proof that the tools reach the model
        (``tools_reach_model``), whose token counts are returned for the run's record."""
        body = {"model": self.model, "messages": PREFLIGHT_MESSAGES, "tools": tools}
        try:
            reply = self.calls.call(lambda: self._post({**body, **self.sampling}))
        except RejectedRequest as refused:
            raise ServerRefusal(
                f"model server {self.calls.url} refuses the protocol's request before any "
                f"episode: {refused}. The request carried {sorted(self.sampling)}; fix the "
                "protocol's values (or model_server.engine, which decides how they are "
                "spelled) and run again"
            ) from None
        return self.tools_reach_model(tools, prompt_tokens_of(reply))

    def tools_reach_model(
        self, tools: list[dict[str, Any]], with_tools: int | None
    ) -> dict[str, Any]:
        """Whether the prompt the server builds holds the tools: the same messages cost more
        prompt tokens with the tools than without them, as the server counts them. A chat
        template without tool support drops them silently (SmolLM2's GGUF template in
        llama-cpp-python 0.3.36: the same 26 tokens either way), and every episode would
        then end without a tool call, measuring nothing of the model's tool use."""
        if not tools:
            return {"tools": 0}
        bare = {k: v for k, v in self.sampling.items() if k != "tool_choice"}
        body = {"model": self.model, "messages": PREFLIGHT_MESSAGES, **bare, "max_tokens": 1}
        names = ", ".join(sorted(str(t.get("function", {}).get("name")) for t in tools))
        try:
            without = prompt_tokens_of(self.calls.call(lambda: self._post(body)))
        except RejectedRequest as refused:
            raise ServerRefusal(
                f"model server {self.calls.url} refuses the pre-flight's tools check (the "
                f"same messages without the run's tools ({names}), max_tokens 1) before any "
                f"episode: {refused}. Whether the tools reach the model cannot be shown; "
                "fix what the server names and run again"
            ) from None
        if not with_tools or not without:
            raise ServerRefusal(
                f"model server {self.calls.url} (model {self.model}) reports no prompt token "
                "count (usage.prompt_tokens) in its replies, so whether the run's tools "
                f"({names}) reach the model cannot be shown; serve the model with an engine "
                "that reports usage (sglang, vLLM and llama.cpp do)"
            )
        if with_tools <= without:
            raise ServerRefusal(
                f"model server {self.calls.url} builds the same prompt for model {self.model} "
                f"with the run's {len(tools)} tools ({names}) as without them ({with_tools} "
                f"and {without} prompt tokens): its chat template drops the tools, so the "
                "model would never see one. Fix: serve a chat template that renders tools "
                "(llama.cpp's llama-server: --jinja; llama-cpp-python: --chat_format "
                "hf-tokenizer-config with a template that writes the tools, or "
                "chatml-function-calling; sglang and vLLM: the model's own tool-capable "
                "template, or --chat-template)"
            )
        return {
            "tools": len(tools),
            "prompt_tokens_with_tools": with_tools,
            "prompt_tokens_without_tools": without,
        }

    def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> AssistantTurn:
        body = {"model": self.model, "messages": messages, "tools": tools, **self.sampling}
        retried: list[tuple[str, float]] = []
        response = self.calls.call(
            lambda: self._post(body), on_retry=lambda kind: retried.append((kind, time.monotonic()))
        )
        reconnected = [at for kind, at in retried if kind in RECONNECTS]
        if reconnected and self.on_reconnect is not None:
            self.on_reconnect(reconnected[-1])
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
            resent_after_timeout=sum(kind == "timeout" for kind, _ in retried),
            model=str(response["model"]) if response.get("model") is not None else None,
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


# How each engine says a prompt is past its context: sglang and vLLM ("maximum context
# length"), llama-cpp-python (llama_cpp/server/errors.py, code context_length_exceeded),
# llama.cpp's llama-server (tools/server: "exceeds the available context size", type
# exceed_context_size_error); one outcome, context_overflow, for all of them.
CONTEXT_OVERFLOW_WORDS = ("context length", "context_length", "context size", "context_size")


def prompt_tokens_of(reply: Any) -> int | None:
    """The prompt tokens a chat completion's usage reports; None where it reports none."""
    usage = reply.get("usage") if isinstance(reply, dict) else None
    counted = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return int(counted) if isinstance(counted, int | float) else None


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
    kinds = [body.get(key) for key in ("type", "code")] if isinstance(body, dict) else []
    said = " ".join([message, *(str(kind) for kind in kinds if kind)]).lower()
    overflow = any(words in said for words in CONTEXT_OVERFLOW_WORDS)
    return RejectedRequest("context_overflow" if overflow else "rejected_request", message)
