"""The default world over HTTP: the sim policy as an OpenAI-compatible model server and
shopsim as an environment server with slots, on loopback.

It lets the real path (OpenAI client, retries, server identity checks, HTTP environment)
run end to end without a GPU. A fault mode answers a chosen fraction of model requests
with 429 (with Retry-After), 5xx, a slow reply, a malformed tool call or sglang's 400 for
a prompt past the context length, and of environment steps with a dropped reply after the
step was applied; every fault is counted. Either server can be stopped and restarted on its
port (a restarted environment server has lost its episodes).
"""

from __future__ import annotations

import contextlib
import json
import random
import shlex
import socket
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from skilleval.checkpoints.layout import model_dir
from skilleval.checkpoints.tensors import load_policy_tensors
from skilleval.records.policy import AssistantTurn, ToolCall
from skilleval.world.sampling import APPLIED_SAMPLING_PATH, ServerSampling
from skilleval.world.sglang_identity import identity_replies, key_allows, launch_command
from skilleval.world.shopsim import TOOLS, ShopEpisode, ShopWorld, Task, catalogue_from_json
from skilleval.world.sim_policy import SimPolicy, prompt_tokens, weights_salt


@dataclass
class Faults:
    rate: float = 0.0
    kinds: tuple[str, ...] = ("429", "503", "slow")
    slow_s: float = 0.5
    latency_s: float = 0.0
    rng: random.Random = field(default_factory=random.Random)
    lock: threading.Lock = field(default_factory=threading.Lock)
    injected: Counter[str] = field(default_factory=Counter)

    def count(self, event: str) -> None:
        with self.lock:
            self.injected[event] += 1

    def draw(self) -> str | None:
        with self.lock:
            if self.rate and self.rng.random() < self.rate:
                kind = self.rng.choice(self.kinds)
                self.injected[kind] += 1
                return kind
        return None


CONTEXT_OVERFLOW = (
    "Requested token count exceeds the model's maximum context length of 4096 tokens. "
    "You requested a total of 4211 tokens: 4105 tokens from the input messages and 106 "
    "tokens for the completion. Please reduce the number of tokens in the input messages "
    "or the completion to fit within the limit."
)


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


# The replies of the faults that answer instead of the model: status, body, headers.
FAULT_REPLIES: dict[str | None, tuple[int, Any, dict[str, str] | None]] = {
    "429": (429, {"error": {"message": "Too Many Requests (injected)"}}, {"Retry-After": "0.05"}),
    "503": (503, {"error": {"message": "Service Unavailable (injected)"}}, None),
    "context_overflow": (
        400,
        {"object": "error", "message": CONTEXT_OVERFLOW, "code": 400, "type": "BadRequestError",
         "param": None},
        None,
    ),
}  # fmt: skip


def answer(policy: SimPolicy, request: dict[str, Any]) -> AssistantTurn:
    """The policy's turn on a chat request; its usage counts the prompt as a served model
    does: the messages and every tool's schema."""
    tools = request.get("tools") or []
    try:
        return policy.complete(request["messages"], tools)
    except ValueError:  # no task in it (a run's preflight): a model answers that too
        return AssistantTurn(
            "ready", None, (), prompt_tokens(request["messages"], tools), 1, "stop"
        )


def model_handler(
    policy_for: Any, identity: dict[str, Any], faults: Faults, endpoints: str
) -> type:
    replies = identity_replies(identity, endpoints)
    replies["/v1/models"] = {
        "object": "list",
        "data": [{"id": identity["served_model_name"], "object": "model"}],
    }
    sampling = ServerSampling(identity["model_path"], identity["sampling_defaults"])
    api_key = identity.get("api_key")

    class ModelHandler(JsonHandler):
        def refused(self) -> bool:
            if key_allows(api_key, self.command, self.path, self.headers.get("Authorization")):
                return False
            self.reply(401, {"error": "Unauthorized"})
            return True

        def do_GET(self) -> None:
            if self.refused():
                return
            if self.path in ("/health", "/health_generate"):
                self.reply(200, {"status": "ok"})
            elif self.path in replies:
                self.reply(200, replies[self.path])
            elif self.path == APPLIED_SAMPLING_PATH:
                self.reply(200, sampling.report())
            else:
                self.reply(404, {"error": "not found"})

        def do_POST(self) -> None:
            request = self.body()  # read first, as every handler here does
            if self.refused():
                return
            if self.path != "/v1/chat/completions":
                self.reply(404, {"error": "not found"})
                return
            fault = faults.draw()
            if fault in FAULT_REPLIES:
                self.reply(*FAULT_REPLIES[fault])
                return
            time.sleep(faults.latency_s + (faults.slow_s if fault == "slow" else 0.0))
            kwargs = request.get("chat_template_kwargs") or {}
            policy = policy_for(
                sampling.apply(request)["temperature"],
                request.get("max_tokens", 4096),
                kwargs.get("enable_thinking", True),
            )
            turn = answer(policy, request)
            message = turn.as_message()
            if fault == "malformed" and message.get("tool_calls"):
                message["tool_calls"][0]["function"]["arguments"] = "{not json"
            self.reply(200, completion(identity["served_model_name"], message, turn))

    return ModelHandler


def env_handler(world: ShopWorld, slots: int, faults: Faults) -> type:
    episodes: dict[str, ShopEpisode] = {}
    dropped: set[str] = set()
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
            # Read the body before any reply: an unread body would be taken for the next
            # request on this keep-alive connection.
            request = self.body()
            if self.path == "/episodes":
                task_id = request["task_id"]
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
                episode = episodes.get(self.path.split("/")[2])
                if episode is None:
                    self.reply(404, {"error": "no such episode"})
                    return
                episode_id = self.path.split("/")[2]
                if episode_id in dropped:  # a client that re-sends a step may apply it twice
                    faults.count("step_after_dropped_reply")
                result = episode.step(ToolCall("http", request["name"], request["arguments"]))
                if faults.draw() == "drop_step":
                    dropped.add(episode_id)
                    self.close_connection = True  # applied, but the client never hears so
                    return
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


class KillableServer(ThreadingHTTPServer):
    """A server whose stop also cuts its open keep-alive connections, as a killed process
    would; a plain shutdown only stops accepting new ones."""

    daemon_threads = True
    # sglang's listen backlog (it sets none: uvicorn/config.py's default), not socketserver's
    # 5, which 32 threads reconnecting on a loaded host overflowed (TcpExtListenOverflows).
    request_queue_size = 2048

    def __init__(self, address: tuple[str, int], handler: type) -> None:
        super().__init__(address, handler)
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet for connections cut by a kill or a client that went away; loud otherwise."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def kill(self) -> None:
        self.shutdown()
        self.server_close()
        with self.connections_lock:
            for connection in list(self.connections):
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)


def serve(handler: type, port: int) -> KillableServer:
    server = KillableServer(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@dataclass
class WorldServers:
    """Both servers, each restartable on its port from a fresh handler (fresh state)."""

    handlers: dict[str, Callable[[], type]]
    running: dict[str, KillableServer]
    ports: dict[str, int]

    @property
    def model_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['model']}/v1"

    @property
    def env_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['env']}"

    def stop(self, which: str) -> None:
        server = self.running.pop(which, None)
        if server is not None:
            server.kill()

    def restart(self, which: str) -> None:
        self.stop(which)
        self.running[which] = serve(self.handlers[which](), self.ports[which])

    def shutdown(self) -> None:
        for which in list(self.running):
            self.stop(which)


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
    env_faults: Faults | None = None,
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
        "sampling_defaults": "model",  # sglang's default (arg_groups/fields/serving.py)
        **(server_args or {}),
    }
    if "launch_command" not in identity:
        key = ["--api-key", identity["api_key"]] if identity.get("api_key") else []
        identity["launch_command"] = shlex.join([*shlex.split(launch_command(identity)), *key])
    # sglang names the model by its path without --served-model-name (arg_groups/serving_hook)
    identity["served_model_name"] = identity.get("served_model_name") or identity["model_path"]

    def policy_for(temperature: float, max_tokens: int, thinking: bool) -> SimPolicy:
        return SimPolicy(tensors, temperature, max_tokens, thinking, salt, task_seed=seed)

    faults, env_faults = faults or Faults(), env_faults or Faults()
    world = load_world(world_dir)
    handlers: dict[str, Callable[[], type]] = {
        "model": lambda: model_handler(policy_for, identity, faults, identity_endpoints),
        "env": lambda: env_handler(world, slots, env_faults),
    }
    running = {
        "model": serve(handlers["model"](), model_port),
        "env": serve(handlers["env"](), env_port),
    }
    ports = {which: int(server.server_address[1]) for which, server in running.items()}
    return WorldServers(handlers, running, ports)
