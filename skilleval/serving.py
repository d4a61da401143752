"""The model service of a run: its identity, checks against protocol and checkpoint, and
(for model_server process/docker) the sglang lifecycle on the job's leased GPUs.

Choice: the run's own job starts the server and stops it, rather than a Snakemake
``service()`` job shared by several consumers. A service job's consumers start before
it is healthy and group resources add up, whereas here the health check gates the run,
the server can never change during the run or its resume, and it dies with the job.
The cost is one server start per run; to share one server across runs, start it once
and use model_server: external.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from skilleval.checkpoints import checkpoint_fingerprint
from skilleval.errors import SkillevalError

log = logging.getLogger(__name__)


class ServiceError(SkillevalError):
    """The model service is not the one the protocol and checkpoint require."""


def server_root(base_url: str) -> str:
    return base_url.rstrip("/").removesuffix("/v1")


def fetch_identity(base_url: str, timeout_s: float = 10.0) -> dict[str, Any]:
    """What the server says it serves: sglang's info endpoints, else /v1/models."""
    root = server_root(base_url)
    identity: dict[str, Any] = {"base_url": base_url}
    with httpx.Client(timeout=timeout_s, trust_env=False) as client:
        for path in ("/get_model_info", "/get_server_info"):
            try:
                response = client.get(root + path)
            except httpx.TransportError as error:
                raise ServiceError(f"model server {root} unreachable: {error}") from error
            if response.status_code == 200:
                identity[path.strip("/")] = response.json()
        models = client.get(base_url.rstrip("/") + "/models")
        if models.status_code == 200:
            identity["models"] = [m["id"] for m in models.json().get("data", [])]
    keep = ("model_path", "tp_size", "dp_size", "tool_call_parser", "reasoning_parser", "version")
    server = identity.pop("get_server_info", {})
    identity["server"] = {k: server.get(k) for k in keep if k in server}
    return identity


def check_identity(identity: dict[str, Any], server: dict[str, Any], weights: str) -> list[str]:
    """Differences between the served model and what the run requires."""
    problems = []
    model_path = (identity.get("get_model_info") or {}).get("model_path") or identity["server"].get(
        "model_path"
    )
    expected = Path(weights).parent
    if model_path is not None and Path(model_path).name != expected.name:
        problems.append(f"serves {model_path}, but the run's checkpoint is {expected}")
    wanted = {
        "tp_size": server["tp"],
        "dp_size": server["dp_size"],
        "tool_call_parser": server["tool_call_parser"],
        "reasoning_parser": server["reasoning_parser"],
    }
    for key, value in wanted.items():
        served = identity["server"].get(key)
        if value is not None and served is not None and served != value:
            problems.append(f"{key} is {served!r}, the protocol requires {value!r}")
    return problems


class Service:
    """The model service a run talks to; its identity is recorded at start and end."""

    def __init__(
        self,
        backend: str,
        checkpoint_id: str,
        weights: str,
        base_url: str | None = None,
        server: dict[str, Any] | None = None,
    ) -> None:
        self.backend, self.checkpoint_id, self.weights = backend, checkpoint_id, weights
        self.base_url, self.server = base_url, server or {}
        self.checked: dict[str, Any] = {}

    def identity(self) -> dict[str, Any]:
        base = {
            "backend": self.backend,
            "checkpoint_id": self.checkpoint_id,
            "weights_fingerprint": checkpoint_fingerprint(self.weights),
        }
        if self.backend == "sim":
            return {**base, "model_path": self.weights}
        assert self.base_url is not None
        return {**base, **fetch_identity(self.base_url)}

    def check(self) -> dict[str, Any]:
        identity = self.identity()
        if self.backend != "sim":
            problems = check_identity(identity, self.server, self.weights)
            if problems:
                raise ServiceError(
                    f"model server at {self.base_url} does not match the run: "
                    + "; ".join(problems)
                    + ". Serve the registered checkpoint with the protocol's flags."
                )
        self.checked = identity
        return identity

    def served_model(self) -> str:
        """Model name to send: the first the server lists when the run started."""
        models = self.checked.get("models") or []
        return str(models[0]) if models else "default"


def sglang_arguments(weights: str, server: dict[str, Any], port: int) -> list[str]:
    return [
        "--model-path",
        str(Path(weights).parent),
        "--tp",
        str(server["tp"]),
        "--dp-size",
        str(server["dp_size"]),
        "--tool-call-parser",
        server["tool_call_parser"],
        "--reasoning-parser",
        server["reasoning_parser"],
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]


def wait_healthy(base_url: str, timeout_s: float, alive: Any) -> None:
    root = server_root(base_url)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive():
            raise ServiceError(f"model server for {root} exited during start-up; see the job log")
        try:
            if httpx.get(root + "/health", timeout=5, trust_env=False).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(1.0)
    raise ServiceError(f"model server {root} not healthy after {timeout_s:.0f}s")


@contextlib.contextmanager
def launched_server(
    kind: str, weights: str, server: dict[str, Any], gpus: str, port: int
) -> Iterator[None]:
    """Start sglang on the leased GPUs, wait for health, stop it and its children after."""
    launch = server["launch"]
    base_url = f"http://127.0.0.1:{port}/v1"
    arguments = sglang_arguments(weights, server, port)
    if kind == "process":
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": gpus}
        process = subprocess.Popen(
            [*launch["command"], *arguments], env=env, start_new_session=True
        )
        log.info("model server pid %d on GPUs %s: %s", process.pid, gpus, arguments)
        try:
            wait_healthy(base_url, launch["startup_timeout_s"], lambda: process.poll() is None)
            yield
        finally:
            stop_process_group(process)
    elif kind == "docker":
        import docker  # lazy: only GPU hosts that serve through docker need the SDK

        client = docker.from_env()
        weights_dir = str(Path(weights).resolve().parent)
        container = client.containers.run(
            launch["image"],
            ["python3", "-m", "sglang.launch_server", *arguments],
            detach=True,
            network_mode="host",
            ipc_mode="host",
            volumes={weights_dir: {"bind": weights_dir, "mode": "ro"}},
            device_requests=[
                docker.types.DeviceRequest(device_ids=gpus.split(","), capabilities=[["gpu"]])
            ],
        )
        log.info("model server container %s on GPUs %s", container.short_id, gpus)
        try:
            wait_healthy(
                base_url,
                launch["startup_timeout_s"],
                lambda: container.reload() or container.status != "exited",
            )
            yield
        finally:
            container.stop(timeout=30)
            container.remove(force=True)
    else:
        raise ServiceError(f"cannot launch a model server of kind {kind!r}")


def stop_process_group(process: subprocess.Popen[Any], grace_s: float = 30.0) -> None:
    """SIGTERM the server's whole process group, SIGKILL what is left after a grace period."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
