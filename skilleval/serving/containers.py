"""Model-server containers: labelled with the run and the lease that own them, so that what a
killed job leaves behind is found and removed.

A job killed with SIGKILL cannot stop its container, which keeps its port and its cards.
Every container therefore carries labels naming its run, its cards, its port and its owner
(host, pid and that process's start time, so a reused pid is not mistaken for the owner).
Before a job starts a container it removes every skilleval container whose owner is gone;
``skilleval clean RUN`` does the same for one run. A container whose owner still lives is
never touched, and a job refuses to start if a live one holds a card it has just leased
(two leases on one card would be a bug in the leasing, not something to paper over).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from skilleval.errors import ServiceError

log = logging.getLogger(__name__)
LABEL = "org.skilleval"
OWNER = f"{LABEL}.owner"


def process_start(pid: int) -> str | None:
    """The live process's start time in clock ticks since boot (/proc/PID/stat field 22);
    None when there is no such process or only its zombie (killed, not yet reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state, *fields = stat.rsplit(")", 1)[1].split()
    return None if state in ("Z", "X") else fields[18]


def owner_token(pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{process_start(pid)}"


def owner_alive(token: str) -> bool:
    """Whether the process a label names still runs (on another host: assumed alive)."""
    host, pid, started = token.rsplit(":", 2)
    if host != socket.gethostname():
        return True
    return process_start(int(pid)) == started


def container_labels(run: str, cards: str, port: int) -> dict[str, str]:
    return {
        OWNER: owner_token(),
        f"{LABEL}.run": run,
        f"{LABEL}.cards": cards,
        f"{LABEL}.port": str(port),
    }


def leftovers(client: Any, run: str | None = None) -> list[Any]:
    """skilleval containers whose owner is gone (only ``run``'s, if given)."""
    filters = {"label": [OWNER] + ([f"{LABEL}.run={run}"] if run else [])}
    return [
        container
        for container in client.containers.list(all=True, filters=filters)
        if not owner_alive(container.labels[OWNER])
    ]


def remove_leftovers(client: Any, run: str | None = None) -> list[str]:
    """Remove the containers ``leftovers`` finds; their names."""
    removed = []
    for container in leftovers(client, run):
        log.warning(
            "removing container %s left by run %s (owner %s is gone; cards %s)",
            container.name,
            container.labels.get(f"{LABEL}.run"),
            container.labels[OWNER],
            container.labels.get(f"{LABEL}.cards"),
        )
        container.remove(force=True)
        removed.append(container.name)
    return removed


def check_cards_free(client: Any, cards: str) -> None:
    """No live skilleval container may hold a card this job has just leased."""
    mine = set(cards.split(",")) - {""}
    for container in client.containers.list(all=True, filters={"label": [OWNER]}):
        held = set(container.labels.get(f"{LABEL}.cards", "").split(",")) - {""}
        if held & mine:
            raise ServiceError(
                f"container {container.name} (run {container.labels.get(f'{LABEL}.run')}, owner "
                f"{container.labels[OWNER]}) still holds cards {sorted(held & mine)} that this "
                "job has leased; stop it, or check that every host shares one lock directory"
            )


def container_spec(
    launch: Mapping[str, Any],
    arguments: Sequence[str],
    weights_dir: str,
    cards: str,
    labels: Mapping[str, str],
) -> dict[str, Any]:
    """Keyword arguments of docker's containers.create for the model server."""
    import docker

    mounts = {
        path: {"bind": path, "mode": "ro"} for path in [weights_dir, *launch.get("mounts", [])]
    }
    requests = (
        [docker.types.DeviceRequest(device_ids=cards.split(","), capabilities=[["gpu"]])]
        if launch.get("device_requests", True) and cards
        else []
    )
    return {
        "image": launch["image"],
        "command": [*launch["command"], *arguments],
        "detach": True,
        "network_mode": "host",
        "ipc_mode": "host",
        "volumes": mounts,
        "device_requests": requests,
        "labels": dict(labels),
    }


@contextlib.contextmanager
def running_container(client: Any, spec: Mapping[str, Any]) -> Iterator[Any]:
    """Create and start the container; stop and remove it afterwards, whatever happens."""
    container = client.containers.create(**spec)
    try:
        container.start()
        yield container
    finally:
        with contextlib.suppress(Exception):
            container.stop(timeout=30)
        container.remove(force=True)


def docker_client() -> Any:
    try:
        import docker
    except ImportError as error:
        raise ServiceError(
            "model_server: docker needs the docker SDK: pip install -e '.[docker]'"
        ) from error
    try:
        return docker.from_env()
    except docker.errors.DockerException as error:
        raise ServiceError(
            f"model_server: docker cannot reach a Docker engine ({error}); start dockerd or "
            "set DOCKER_HOST"
        ) from error
