"""The model client against replies the stand-in never gives: the API key on the wire, the
refusal formats of the OpenAI API, sglang and FastAPI, a reply that is not JSON, and the
proxy variables a trust_env client honours."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from skilleval.errors import RejectedRequest, ServerRefusal, SkillevalError
from skilleval.policy.openai_policy import OpenAIPolicy
from skilleval.protocol.sections import Sampling
from skilleval.serving.engines import ENGINES
from skilleval.serving.http import JsonClient, proxy_for
from skilleval.serving.outage import OutageError, RetryLedger

SAMPLING = Sampling.model_validate(
    {
        "temperature": 0.6,
        "top_p": 0.95,
        "top_k": None,
        "max_tokens": 64,
        "enable_thinking": False,
        "tool_choice": "auto",
        "send_seed": False,
        "trust_env": False,
    }
)
CHAT_REPLY = {
    "choices": [
        {
            "message": {
                "content": "",
                "tool_calls": [
                    {"id": "c1", "function": {"name": "search", "arguments": '{"q": "shoes"}'}}
                ],
            },
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 12, "completion_tokens": 3},
}


class CannedServer(ThreadingHTTPServer):
    """Answers every POST with the next (status, headers, body) and keeps what it was sent."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), CannedHandler)
        self.replies: list[tuple[int, dict[str, str], bytes]] = []
        self.received: list[tuple[dict[str, str], Any]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class CannedHandler(BaseHTTPRequestHandler):
    server: CannedServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.received.append((dict(self.headers), body))
        status, headers, payload = self.server.replies.pop(0)
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def canned() -> Iterator[CannedServer]:
    server = CannedServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def policy(url: str, key_env: str | None = None, budget_s: float = 5.0) -> OpenAIPolicy:
    return OpenAIPolicy(
        url,
        "m",
        SAMPLING,
        key_env,
        5.0,
        RetryLedger(),
        budget_s,
        connections=2,
        engine=ENGINES["sglang"],
    )


def reply(status: int, body: Any, headers: dict[str, str] | None = None) -> tuple[int, Any, bytes]:
    payload = body if isinstance(body, bytes) else json.dumps(body).encode()
    return status, {"Content-Type": "application/json", **(headers or {})}, payload


def test_a_turn_carries_the_key_and_every_sampling_field(
    canned: CannedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKILLEVAL_CLIENT_KEY", "sk-client-test")
    canned.replies.append(reply(200, CHAT_REPLY))
    turn = policy(canned.url, "SKILLEVAL_CLIENT_KEY").complete(
        [{"role": "user", "content": "hi"}], []
    )
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [("search", {"q": "shoes"})]
    assert (turn.prompt_tokens, turn.completion_tokens, turn.finish_reason) == (12, 3, "tool_calls")
    ((headers, body),) = canned.received
    assert headers["Authorization"] == "Bearer sk-client-test"
    assert headers["Content-Type"] == "application/json"
    # every parameter a server could fill from the checkpoint is on the wire
    assert {k: body[k] for k in ("top_k", "min_p", "repetition_penalty")} == {
        "top_k": -1,
        "min_p": 0.0,
        "repetition_penalty": 1.0,
    }


@pytest.mark.parametrize(
    ("body", "kind", "message"),
    [
        (
            {"error": {"message": "This model's maximum context length is 4096 tokens"}},
            "context_overflow",
            "HTTP 400: This model's maximum context length is 4096 tokens",
        ),
        (
            {"object": "error", "message": "bad tool_choice", "code": 400},
            "rejected_request",
            "HTTP 400: bad tool_choice",
        ),
        (  # llama.cpp's llama-server (tools/server/utils.hpp format_error_response)
            {
                "error": {
                    "code": 400,
                    "message": "request (5017 tokens) exceeds the available context size "
                    "(4096 tokens), try increasing it",
                    "type": "exceed_context_size_error",
                }
            },
            "context_overflow",
            "HTTP 400: request (5017 tokens) exceeds the available context size (4096 tokens), "
            "try increasing it",
        ),
        (  # llama-cpp-python 0.3.36 (llama_cpp/server/errors.py context_length_exceeded)
            {
                "error": {
                    "message": "This model's maximum context length is 4096 tokens. However, "
                    "you requested 5209 tokens (5017 in the messages, 192 in the completion). "
                    "Please reduce the length of the messages or completion.",
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "context_length_exceeded",
                }
            },
            "context_overflow",
            "HTTP 400: This model's maximum context length is 4096 tokens. However, you "
            "requested 5209 tokens (5017 in the messages, 192 in the completion). Please "
            "reduce the length of the messages or completion.",
        ),
        ({"detail": "Not Found"}, "rejected_request", "HTTP 400: Not Found"),
        (b"plain words", "rejected_request", "HTTP 400: plain words"),
    ],
)
def test_a_refusal_ends_the_episode_with_the_servers_message(
    canned: CannedServer, body: Any, kind: str, message: str
) -> None:
    canned.replies.append(reply(400, body))
    with pytest.raises(RejectedRequest) as refused:
        policy(canned.url).complete([{"role": "user", "content": "hi"}], [])
    assert (refused.value.reason, str(refused.value)) == (kind, message)
    assert len(canned.received) == 1  # a refusal is never retried


def test_a_refused_tools_check_before_any_episode_is_one_refusal_naming_it(
    canned: CannedServer,
) -> None:
    """The pre-flight's first request answered, its second (the same messages without the
    tools) refused: a ServerRefusal (one line on the build's terminal), never the bare
    RejectedRequest that an episode takes as the model's failure on its task."""
    tools = [{"type": "function", "function": {"name": "search", "parameters": {}}}]
    canned.replies.append(reply(200, CHAT_REPLY))
    canned.replies.append(reply(400, {"error": {"message": "max_tokens must be at least 8"}}))
    with pytest.raises(ServerRefusal) as refused:
        policy(canned.url).preflight(tools)
    said = str(refused.value)
    assert "refuses the pre-flight's tools check" in said and "(search)" in said
    assert "HTTP 400: max_tokens must be at least 8" in said and "\n" not in said
    assert len(canned.received) == 2


@pytest.mark.parametrize("status", [401, 404, 301])
def test_a_reply_that_refuses_every_request_is_no_episodes_end(
    canned: CannedServer, status: int
) -> None:
    canned.replies.append(reply(status, {"error": {"message": "Invalid API key"}}))
    with pytest.raises(SkillevalError, match=f"answered HTTP {status} .*api_key_env"):
        policy(canned.url).complete([{"role": "user", "content": "hi"}], [])


def test_a_reply_that_is_not_json_names_the_server(canned: CannedServer) -> None:
    canned.replies.append(reply(200, b"<html>proxy login</html>"))
    with pytest.raises(SkillevalError, match=r"answered a chat completion that is not JSON"):
        policy(canned.url).complete([{"role": "user", "content": "hi"}], [])


def test_429_waits_for_retry_after_then_succeeds(canned: CannedServer) -> None:
    canned.replies += [reply(429, {"error": {"message": "slow"}}, {"Retry-After": "0.3"})]
    canned.replies.append(reply(200, CHAT_REPLY))
    client = policy(canned.url)
    client.complete([{"role": "user", "content": "hi"}], [])
    assert client.calls.ledger.snapshot() == {"model/429": 1}
    assert len(canned.received) == 2


def test_a_refused_connection_is_an_outage_past_its_budget() -> None:
    with pytest.raises(OutageError, match="unreachable"):
        policy("http://127.0.0.1:9/v1", budget_s=0.3).complete([], [])


def test_proxies_come_from_the_environment_only_when_trusted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("http_proxy", "http://proxy.example:3128")
    monkeypatch.setenv("no_proxy", "internal.example")
    assert proxy_for("http://api.example/v1") == "http://proxy.example:3128"
    assert proxy_for("http://internal.example/v1") is None
    assert type(JsonClient("http://api.example/v1", 1, 1, trust_env=True).pool).__name__ == (
        "ProxyManager"
    )
    assert type(JsonClient("http://api.example/v1", 1, 1).pool).__name__ == "PoolManager"
