"""Launching a model server on a job's leased GPUs, as a process or a docker container:
the protocol's engine (serving.engines), with that engine's launch arguments.

Choice: the run's own job starts the server and stops it, rather than a Snakemake
``service()`` job shared by several consumers. A service job's consumers start before
it is healthy and group resources add up, whereas here the health check gates the run,
the server can never change during the run or its resume, and it dies with the job.
The cost is one server start per run; to share one server across runs, start it once
and use model_server: external.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from urllib3.exceptions import HTTPError

from skilleval.errors import ServiceError
from skilleval.protocol.sections import Launch, ModelServer
from skilleval.serving.containers import (
    check_cards_free,
    container_labels,
    container_spec,
    docker_client,
    ensure_image,
    remove_leftovers,
    running_container,
)
from skilleval.serving.engines import ENGINES, Engine
from skilleval.serving.gpu import cards_for, job_lease, lock_directory, shared_directory
from skilleval.serving.http import JsonClient, api_key
from skilleval.serving.processes import (
    ServerLabel,
    port_lease,
    served_model_name,
    stop_orphans,
)
from skilleval.serving.service import server_root

log = logging.getLogger(__name__)
SERVER_LOG = logging.getLogger("sglang")


def launched_engine(kind: str, server: ModelServer) -> Engine:
    """The engine a run's job launches: the protocol's model_server.engine (sglang when it
    names none), refused where the run cannot launch it."""
    name = server.engine or "sglang"
    engine = ENGINES[name]
    launchable = sorted(n for n, e in ENGINES.items() if e.launch is not None)
    if engine.launch is None:
        raise ServiceError(
            f"model_server.engine {name} cannot be launched by a run's job (the engines it "
            f"launches: {', '.join(launchable)}); fix: serve it yourself and set "
            "backends.model_server: external"
        )
    if kind == "docker" and name != "sglang":
        raise ServiceError(
            f"model_server docker launches sglang's image only, and model_server.engine is "
            f"{name}; fix: backends.model_server: process"
        )
    return engine


def wait_healthy(
    base_url: str,
    name: str,
    timeout_s: float,
    alive: Any,
    headers: dict[str, str],
    ready_path: str = "/health",
) -> None:
    """Wait for ``ready_path`` (the engine's: sglang's /health), then make sure the server
    that answered is this job's: its /v1/models must list the name this job gave it.
    ``headers``: the protocol's key, which a server started with --api-key wants there."""
    root = server_root(base_url)
    client = JsonClient(root, 5.0, connections=1)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive():
            raise ServiceError(f"model server for {root} exited during start-up")
        try:
            if client.get(ready_path).status == 200:
                break
        except HTTPError:
            pass
        time.sleep(1.0)
    else:
        raise ServiceError(f"model server {root} not healthy after {timeout_s:.0f}s")
    served = served_names(base_url, headers)
    if name not in served:
        raise ServiceError(
            f"{root} answered /health but serves {served or 'no model it names'}, not this "
            f"job's {name}: another process holds the port; stop it (skilleval clean) and "
            "re-run"
        )


def served_names(base_url: str, headers: dict[str, str]) -> list[str]:
    try:
        reply = JsonClient(base_url, 10.0, connections=1, headers=headers).get("/models")
        return [str(m["id"]) for m in reply.json()["data"]] if reply.status == 200 else []
    except (HTTPError, ValueError, KeyError, TypeError):
        return []


@contextlib.contextmanager
def owned_server(kind: str, run: str, weights: str, server: ModelServer) -> Iterator[str]:
    """The job's own server: stop the servers killed jobs left, lease cards and a port,
    start the protocol's engine there and yield its base URL once it proves it is this
    job's."""
    if kind not in ("process", "docker"):
        raise ServiceError(f"cannot launch a model server of kind {kind!r}")
    engine = launched_engine(kind, server)
    launch = server.launch
    assert engine.launch is not None and launch is not None, "the config's checks ask for both"
    if engine.launch.runs_engine(kind, launch):
        engine.launch.check_servable(weights)
    key = {"Authorization": f"Bearer {api_key(server.api_key_env)}"}
    lock_dir = shared_directory(lock_directory())
    occupied = stop_orphans(lock_dir)
    client = None
    if kind == "docker":
        client = docker_client()
        remove_leftovers(client)
    base_port = urlparse(server.base_url).port or 30000
    with (
        job_lease(cards_for(kind, server.tp, server.dp_size), occupied) as lease,
        port_lease(base_port, lock_dir) as port,
    ):
        cards = lease.visible_devices
        name = served_model_name(run, cards, port)
        log.info("run %s: GPUs %s and port %d leased for the model server", run, cards, port)
        arguments = engine.launch.arguments(weights, server, port, name)
        base_url = f"http://127.0.0.1:{port}/v1"
        healthy = functools.partial(
            wait_healthy,
            base_url,
            name,
            launch.startup_timeout_s,
            headers=key,
            ready_path=engine.launch.ready_path,
        )
        if client is None:
            started = server_process(run, launch, arguments, cards, port, name, lock_dir, healthy)
        else:
            started = server_container(
                client,
                run,
                launch,
                engine.launch.served_path(weights),
                arguments,
                cards,
                port,
                healthy,
            )
        try:
            with started:
                yield base_url
        finally:
            log.info("run %s: model server stopped; GPUs %s and port %d released", run, cards, port)


@contextlib.contextmanager
def server_process(
    run: str,
    launch: Launch,
    arguments: list[str],
    cards: str,
    port: int,
    name: str,
    lock_dir: Path,
    healthy: Callable[[Callable[[], bool]], None],
) -> Iterator[None]:
    """sglang as a process on the leased cards, its output in the run log, labelled in
    the lock directory while it runs; stopped with all its children afterwards."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": cards}
    process = subprocess.Popen(
        [*launch.command, *arguments],
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    label = ServerLabel.for_process(run, cards, port, name, process.pid).write(lock_dir)
    output = ServerOutput(process)
    log.info("model server pid %d on GPUs %s, port %d: %s", process.pid, cards, port, arguments)
    try:
        try:
            healthy(lambda: process.poll() is None)
        except ServiceError as error:
            raise ServiceError(f"{error}; sglang said:\n{output.tail()}") from error
        yield
    finally:
        stop_process_group(process)
        output.join()
        label.unlink(missing_ok=True)


class ServerOutput:
    """The server's stdout and stderr, line by line into the run log (logger ``sglang``);
    the last lines are kept for an error message."""

    def __init__(self, process: subprocess.Popen[bytes], keep: int = 40) -> None:
        self.lines: collections.deque[str] = collections.deque(maxlen=keep)
        self.thread = threading.Thread(target=self._pump, args=(process,), daemon=True)
        self.thread.start()

    def _pump(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        for raw in process.stdout:
            line = raw.decode(errors="replace").rstrip()
            self.lines.append(line)
            SERVER_LOG.info("%s", line)

    def tail(self) -> str:
        return "\n".join(self.lines) or "(nothing)"

    def join(self) -> None:
        self.thread.join(timeout=10)


@contextlib.contextmanager
def server_container(
    client: Any,
    run: str,
    launch: Launch,
    served: str,
    arguments: list[str],
    cards: str,
    port: int,
    healthy: Callable[[Callable[[], bool]], None],
) -> Iterator[None]:
    """``served``: the checkpoint's path as the engine is given it, mounted as it is."""
    check_cards_free(client, cards)
    spec = container_spec(launch, arguments, served, cards, container_labels(run, cards, port))
    ensure_image(client, launch.image, launch.image_archive)
    with running_container(client, spec) as container:
        log.info(
            "model server container %s (image %s) on GPUs %s, port %d, device requests %s",
            container.name,
            launch.image,
            cards,
            port,
            [r.get("DeviceIDs") for r in spec["device_requests"]] or "none",
        )

        def alive() -> bool:
            container.reload()
            return bool(container.status != "exited")

        try:
            healthy(alive)
        except ServiceError as error:
            output = container.logs(tail=40).decode(errors="replace").strip()
            raise ServiceError(
                f"{error}\ncontainer {container.name} said:\n{output or '(nothing)'}"
            ) from error
        yield


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
