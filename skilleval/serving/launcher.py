"""Launching sglang on a job's leased GPUs, as a process or a docker container.

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
from collections.abc import Iterator, Mapping
from typing import Any

import httpx

from skilleval.checkpoints.layout import model_dir
from skilleval.errors import ServiceError
from skilleval.serving.containers import (
    check_cards_free,
    container_labels,
    container_spec,
    docker_client,
    remove_leftovers,
    running_container,
)
from skilleval.serving.service import server_root

log = logging.getLogger(__name__)


def model_flags(
    model_path: str, tp: object, dp: object, tool_call_parser: str, reasoning_parser: str
) -> list[str]:
    """sglang's flags for the served model, by their full names (sglang 0.5)."""
    return [
        "--model-path",
        model_path,
        "--tp-size",
        str(tp),
        "--dp-size",
        str(dp),
        "--tool-call-parser",
        tool_call_parser,
        "--reasoning-parser",
        reasoning_parser,
    ]


def served_path(weights: str) -> str:
    """The checkpoint directory as the server is given it: absolute, since a container starts
    in its own working directory, but not resolved, since the identity check compares its
    name with the registered checkpoint's (a symlinked checkpoint keeps its name)."""
    return str(model_dir(weights).absolute())


def sglang_arguments(weights: str, server: Mapping[str, Any], port: int) -> list[str]:
    return [
        *model_flags(
            served_path(weights),
            server["tp"],
            server["dp_size"],
            server["tool_call_parser"],
            server["reasoning_parser"],
        ),
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
    kind: str, run: str, weights: str, server: Mapping[str, Any], gpus: str, port: int
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
        client = docker_client()
        remove_leftovers(client)
        check_cards_free(client, gpus)
        spec = container_spec(
            launch, arguments, served_path(weights), gpus, container_labels(run, gpus, port)
        )
        with running_container(client, spec) as container:
            log.info(
                "model server container %s (image %s) on GPUs %s, device requests %s",
                container.name,
                launch["image"],
                gpus,
                [r.get("DeviceIDs") for r in spec["device_requests"]] or "none",
            )

            def alive() -> bool:
                container.reload()
                return bool(container.status != "exited")

            try:
                wait_healthy(base_url, launch["startup_timeout_s"], alive)
            except ServiceError as error:
                output = container.logs(tail=40).decode(errors="replace").strip()
                raise ServiceError(
                    f"{error}\ncontainer {container.name} said:\n{output or '(nothing)'}"
                ) from error
            yield
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
