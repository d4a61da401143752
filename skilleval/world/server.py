"""The default world over HTTP: the sim policy as an OpenAI-compatible model server and
shopsim as an environment server with slots, on loopback.

It lets the real path (OpenAI client, retries, server identity checks, HTTP environment)
run end to end without a GPU. A fault mode answers a chosen fraction of requests with
429 (with Retry-After), 5xx or a slow reply, or sends a malformed tool call.
"""

from __future__ import annotations

import json
import random
import shlex
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from skilleval.checkpoints.layout import model_dir
from skilleval.checkpoints.tensors import load_policy_tensors
from skilleval.policy.sim import SimPolicy, weights_salt
from skilleval.policy.types import AssistantTurn
from skilleval.world.shopsim import TOOLS, ShopEpisode, ShopWorld, Task, catalogue_from_json


@dataclass
class Faults:
    rate: float = 0.0
    kinds: tuple[str, ...] = ("429", "503", "slow")
    slow_s: float = 0.5
    latency_s: float = 0.0
    rng: random.Random = field(default_factory=random.Random)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def draw(self) -> str | None:
        with self.lock:
            if self.rate and self.rng.random() < self.rate:
                return self.rng.choice(self.kinds)
        return None


class JsonHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle on, keep-alive clients wait ~40 ms
    # for the delayed ACK on every reply.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a request log per call would drown the job log."""

    def reply(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length", 0))
        data: dict[str, Any] = json.loads(self.rfile.read(length) or b"{}")
        return data


def completion(model: str, message: dict[str, Any], turn: AssistantTurn) -> dict[str, Any]:
    """An OpenAI chat.completion body for one assistant turn."""
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": turn.finish_reason}],
        "usage": {
            "prompt_tokens": turn.prompt_tokens,
            "completion_tokens": turn.completion_tokens,
            "total_tokens": turn.prompt_tokens + turn.completion_tokens,
        },
    }


def identity_replies(identity: dict[str, Any], endpoints: str) -> dict[str, dict[str, Any]]:
    """sglang's identity endpoints for the served model, in the shapes sglang 0.5.23 replies
    with (``current``) or the shapes of the deprecated pair on older servers."""
    parsers = {k: identity[k] for k in ("tool_call_parser", "reasoning_parser")}
    server_info = {
        "model_path": identity["model_path"],
        "served_model_name": identity["model_path"],
        "tp_size": identity["tp_size"],
        "dp_size": identity["dp_size"],
        **parsers,
        "version": identity["version"],
    }
    if endpoints == "deprecated":
        model_info = {"model_path": identity["model_path"], "is_generation": True}
        return {"/get_model_info": model_info, "/get_server_info": server_info}
    model_info = {
        "model_path": identity["model_path"],
        "served_model_name": identity["model_path"],
        "tokenizer_path": identity["model_path"],
        "is_generation": True,
        "weight_version": "default",
        **parsers,
        "model_type": "shopsim",
        "architectures": ["ShopSimPolicy"],
    }
    launched = {**server_info, "launch_command": identity["launch_command"]}
    return {"/model_info": model_info, "/server_info": launched}


def model_handler(
    policy_for: Any, identity: dict[str, Any], faults: Faults, endpoints: str
) -> type:
    replies = identity_replies(identity, endpoints)

    class ModelHandler(JsonHandler):
        def do_GET(self) -> None:
            if self.path in ("/health", "/health_generate"):
                self.reply(200, {"status": "ok"})
            elif self.path in replies:
                self.reply(200, replies[self.path])
            elif self.path == "/v1/models":
                self.reply(
                    200,
                    {"object": "list", "data": [{"id": identity["model_path"], "object": "model"}]},
                )
            else:
                self.reply(404, {"error": "not found"})

        def do_POST(self) -> None:
            if self.path != "/v1/chat/completions":
                self.reply(404, {"error": "not found"})
                return
            request = self.body()
            fault = faults.draw()
            if fault == "429":
                self.reply(
                    429,
                    {"error": {"message": "Too Many Requests (injected)"}},
                    {"Retry-After": "0.05"},
                )
                return
            if fault == "503":
                self.reply(503, {"error": {"message": "Service Unavailable (injected)"}})
                return
            time.sleep(faults.latency_s + (faults.slow_s if fault == "slow" else 0.0))
            kwargs = request.get("chat_template_kwargs") or {}
            policy = policy_for(
                request.get("temperature", 1.0),
                request.get("max_tokens", 4096),
                kwargs.get("enable_thinking", True),
            )
            turn = policy.complete(request["messages"], request.get("tools") or [])
            message = turn.as_message()
            if fault == "malformed" and message.get("tool_calls"):
                message["tool_calls"][0]["function"]["arguments"] = "{not json"
            self.reply(200, completion(identity["model_path"], message, turn))

    return ModelHandler


def env_handler(world: ShopWorld, slots: int) -> type:
    episodes: dict[str, ShopEpisode] = {}
    lock = threading.Lock()

    class EnvHandler(JsonHandler):
        def do_GET(self) -> None:
            if self.path == "/info":
                self.reply(200, {"slots": slots, "world": "shopsim", "tools": TOOLS})
            elif self.path.startswith("/episodes/") and self.path.endswith("/rewards"):
                episode = episodes.get(self.path.split("/")[2])
                if episode is None:
                    self.reply(404, {"error": "no such episode"})
                else:
                    self.reply(200, episode.rewards())
            else:
                self.reply(404, {"error": "not found"})

        def do_POST(self) -> None:
            if self.path == "/episodes":
                task_id = self.body()["task_id"]
                with lock:
                    if len(episodes) >= slots:
                        self.reply(503, {"error": "no free slot"}, {"Retry-After": "0.1"})
                        return
                    episode_id = uuid.uuid4().hex
                    episodes[episode_id] = world.start(task_id)
                self.reply(
                    200, {"episode_id": episode_id, "instruction": episodes[episode_id].instruction}
                )
            elif self.path.startswith("/episodes/") and self.path.endswith("/step"):
                from skilleval.policy.types import ToolCall

                episode = episodes.get(self.path.split("/")[2])
                if episode is None:
                    self.reply(404, {"error": "no such episode"})
                    return
                call = self.body()
                result = episode.step(ToolCall("http", call["name"], call["arguments"]))
                self.reply(200, {"observation": result.observation, "done": result.done})
            else:
                self.reply(404, {"error": "not found"})

        def do_DELETE(self) -> None:
            with lock:
                episodes.pop(self.path.split("/")[2], None)
            self.reply(200, {"closed": True})

    return EnvHandler


def load_world(world_dir: str) -> ShopWorld:
    root = Path(world_dir)
    splits = json.loads((root / "persona_splits.v1.json").read_text())
    tasks = [Task.from_json(t) for name in ("train", "val", "test") for t in splits.get(name, [])]
    catalogue = root / "catalogue.json"
    return ShopWorld(catalogue_from_json(json.loads(catalogue.read_text()), str(catalogue)), tasks)


@dataclass
class WorldServers:
    model: ThreadingHTTPServer
    env: ThreadingHTTPServer

    @property
    def model_url(self) -> str:
        return f"http://127.0.0.1:{self.model.server_address[1]}/v1"

    @property
    def env_url(self) -> str:
        return f"http://127.0.0.1:{self.env.server_address[1]}"

    def shutdown(self) -> None:
        for server in (self.model, self.env):
            server.shutdown()
            server.server_close()


def launch_command(identity: dict[str, Any]) -> str:
    """The serve-world command line that serves this identity (sglang records its own)."""
    return shlex.join(
        [
            "skilleval",
            "serve-world",
            "--model-path",
            identity["model_path"],
            "--tp-size",
            str(identity["tp_size"]),
            "--dp-size",
            str(identity["dp_size"]),
            "--tool-call-parser",
            identity["tool_call_parser"],
            "--reasoning-parser",
            identity["reasoning_parser"],
        ]
    )


def start_servers(
    checkpoint: str,
    world_dir: str,
    seed: int,
    model_port: int = 0,
    env_port: int = 0,
    slots: int = 48,
    faults: Faults | None = None,
    server_args: dict[str, Any] | None = None,
    identity_endpoints: str = "current",
) -> WorldServers:
    """Start both servers on loopback in background threads (port 0 picks a free port)."""
    tensors = load_policy_tensors(checkpoint)
    salt = weights_salt(tensors)
    identity = {
        "model_path": str(model_dir(checkpoint).resolve()),
        "tp_size": 1,
        "dp_size": 4,
        "tool_call_parser": "qwen3_coder",
        "reasoning_parser": "qwen3",
        "version": "skilleval-sim",
        **(server_args or {}),
    }
    identity.setdefault("launch_command", launch_command(identity))

    def policy_for(temperature: float, max_tokens: int, thinking: bool) -> SimPolicy:
        return SimPolicy(tensors, temperature, max_tokens, thinking, salt, task_seed=seed)

    faults = faults or Faults()
    model = ThreadingHTTPServer(
        ("127.0.0.1", model_port), model_handler(policy_for, identity, faults, identity_endpoints)
    )
    env = ThreadingHTTPServer(("127.0.0.1", env_port), env_handler(load_world(world_dir), slots))
    for server in (model, env):
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
    return WorldServers(model, env)
