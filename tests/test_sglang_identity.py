"""Identity checks against servers shaped like sglang's current and deprecated endpoints."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from skilleval.errors import ServiceError
from skilleval.protocol.sections import ModelServer
from skilleval.serving.engines.sglang import check_identity, launch_arguments, sglang_arguments
from skilleval.serving.service import Service, fetch_identity
from skilleval.world.sglang_identity import key_allows

FIXTURES = Path(__file__).parent / "data" / "sglang"
# The model server as a run is given it (RunInputs.model_server); the address is the test's.
PROTOCOL = ModelServer(
    tp=1,
    dp_size=4,
    tool_call_parser="qwen3_coder",
    reasoning_parser="qwen3",
    base_url="http://127.0.0.1:9/v1",
    api_key_env=None,
    request_timeout_s=10.0,
    launch=None,
)
WEIGHTS = "/models/qwen35-4b-iter80/model.safetensors.index.json"


def fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return data


def models_reply(model_path: str) -> dict[str, Any]:
    return {"object": "list", "data": [{"id": model_path, "object": "model"}]}


class Replies(BaseHTTPRequestHandler):
    replies: ClassVar[dict[str, Any]] = {}
    asked: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.asked.append(self.path)
        body = self.replies.get(self.path)
        data = json.dumps(body if body is not None else {"detail": "Not Found"}).encode()
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture()
def serve() -> Iterator[Any]:
    started: list[ThreadingHTTPServer] = []

    def start(replies: dict[str, Any]) -> tuple[str, list[str]]:
        handler = type("Handler", (Replies,), {"replies": replies, "asked": []})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/v1", handler.asked

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


def current(**model_info_changes: Any) -> dict[str, Any]:
    return {
        "/model_info": {**fixture("model_info"), **model_info_changes},
        "/server_info": fixture("server_info"),
        "/v1/models": models_reply("/models/qwen35-4b-iter80"),
    }


def test_current_endpoints_are_read_and_pass(serve: Any) -> None:
    url, asked = serve(current())
    identity = fetch_identity(url)
    assert identity["identity_endpoints"] == "current: /model_info, /server_info"
    assert identity["model_info"]["tool_call_parser"] == "qwen3_coder"
    assert identity["model_info"]["architectures"] == ["Qwen3ForCausalLM"]
    assert "--tp-size 1" in identity["server"]["launch_command"]
    assert "startup_time" not in identity["server"]  # changes between start and end checks
    assert check_identity(identity, PROTOCOL, WEIGHTS) == []
    assert not any(path.startswith("/get_") for path in asked), "deprecated endpoints called"


def test_deprecated_endpoints_are_the_fallback(serve: Any) -> None:
    url, asked = serve(
        {
            "/get_model_info": fixture("get_model_info"),
            "/get_server_info": fixture("get_server_info"),
            "/v1/models": models_reply("/models/qwen35-4b-iter80"),
        }
    )
    identity = fetch_identity(url)
    assert identity["identity_endpoints"] == "deprecated: /get_model_info, /get_server_info"
    assert identity["server"]["tool_call_parser"] == "qwen3_coder"
    assert check_identity(identity, PROTOCOL, WEIGHTS) == []
    assert asked[:2] == ["/model_info", "/get_model_info"]


@pytest.mark.parametrize(
    ("replies", "problem"),
    [
        (current(tool_call_parser="hermes"), "tool_call_parser is 'hermes'"),
        (current(reasoning_parser="deepseek-r1"), "reasoning_parser is 'deepseek-r1'"),
        (current(model_path="/models/qwen35-4b-base-hf"), "serves /models/qwen35-4b-base-hf"),
        (
            {
                **current(),
                "/server_info": {
                    **fixture("server_info"),
                    "launch_command": "python3 -m sglang.launch_server --model-path "
                    "/models/qwen35-4b-iter80 --tensor-parallel-size=2 --dp-size 4",
                },
            },
            "launch_command sets tp_size to '2'",
        ),
    ],
)
def test_a_server_that_differs_from_the_protocol_is_refused(
    serve: Any, replies: dict[str, Any], problem: str
) -> None:
    url, _ = serve(replies)
    service = Service("openai", "final", WEIGHTS, url, PROTOCOL)
    service.identity = lambda: fetch_identity(url)  # type: ignore[method-assign]
    with pytest.raises(ServiceError, match="does not match the run") as refused:
        service.check()
    assert problem in str(refused.value)


def test_the_launcher_uses_sglang_s_full_flag_names() -> None:
    arguments = sglang_arguments(WEIGHTS, PROTOCOL, 30001, "skilleval/final-ST/gpu1/port30001")
    flags = [a for a in arguments if a.startswith("--")]
    assert flags == [
        "--model-path",
        "--tp-size",
        "--dp-size",
        "--tool-call-parser",
        "--reasoning-parser",
        "--served-model-name",
        "--sampling-defaults",
        "--host",
        "--port",
    ]
    assert arguments[1] == "/models/qwen35-4b-iter80"
    assert launch_arguments(" ".join(["python3", "-m", "sglang.launch_server", *arguments])) == {
        "tp_size": "1",
        "dp_size": "4",
        "tool_call_parser": "qwen3_coder",
        "reasoning_parser": "qwen3",
        "sampling_defaults": "openai",
    }


def test_a_symlinked_checkpoint_is_served_by_its_own_absolute_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Absolute (a container does not start in the workflow's directory), not resolved: the
    identity check compares the served directory's name with the registered one."""
    store = tmp_path / "store" / "snapshot-7f3a"
    store.mkdir(parents=True)
    (tmp_path / "qwen35-4b-iter80").symlink_to(store)
    monkeypatch.chdir(tmp_path)
    served = sglang_arguments("qwen35-4b-iter80/model.safetensors", PROTOCOL, 30001, "n")[1]
    assert served == str(tmp_path / "qwen35-4b-iter80")
    identity = {"model_info": {"model_path": served}}
    assert not [
        p
        for p in check_identity(identity, PROTOCOL, "qwen35-4b-iter80/model.safetensors")
        if p.startswith("serves")
    ]


@pytest.mark.parametrize("endpoints", ["current", "deprecated"])
def test_the_project_test_server_answers_like_sglang(small_world: Path, endpoints: str) -> None:
    from skilleval.world.server import start_servers
    from tests.conftest import AS_LAUNCHED

    weights = small_world / "checkpoints" / "base" / "model.safetensors"
    servers = start_servers(
        str(weights), str(small_world), 1, server_args=AS_LAUNCHED, identity_endpoints=endpoints
    )
    try:
        identity = fetch_identity(servers.model_url)
    finally:
        servers.shutdown()
    assert identity["identity_endpoints"].startswith(endpoints)
    shape = set(fixture("model_info" if endpoints == "current" else "get_model_info"))
    assert set(identity["model_info"]) <= shape
    if endpoints == "current":
        assert set(identity["model_info"]) == {
            "model_path",
            "served_model_name",
            "preferred_sampling_params",
            "weight_version",
            "tool_call_parser",
            "reasoning_parser",
            "architectures",
        }
    assert check_identity(identity, PROTOCOL, str(weights)) == []


@pytest.mark.parametrize(
    ("method", "path", "authorization", "allowed"),
    [
        ("POST", "/v1/chat/completions", "Bearer sk-lab", True),
        ("POST", "/v1/chat/completions", "bearer sk-lab", True),  # any case of the scheme
        ("POST", "/v1/chat/completions", "Bearer sk-other", False),
        ("POST", "/v1/chat/completions", "sk-lab", False),
        ("GET", "/v1/models", None, False),
        ("GET", "/health_generate", None, True),
        ("GET", "/metrics", None, True),
        ("OPTIONS", "/v1/chat/completions", None, True),
    ],
)
def test_the_stand_in_key_check_decides_as_sglang_does(
    method: str, path: str, authorization: str | None, allowed: bool
) -> None:
    """sglang/srt/utils/auth.py decide_request_auth at AuthLevel.NORMAL with --api-key."""
    assert key_allows("sk-lab", method, path, authorization) is allowed
    assert key_allows(None, method, path, None)  # no --api-key: everything passes
