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
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from skilleval.errors import ServiceError
from skilleval.protocol.sections import Launch
from skilleval.serving.owners import owner_alive, owner_token

log = logging.getLogger(__name__)
LABEL = "org.skilleval"
OWNER = f"{LABEL}.owner"


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
    launch: Launch,
    arguments: Sequence[str],
    weights_dir: str,
    cards: str,
    labels: Mapping[str, str],
) -> dict[str, Any]:
    """Keyword arguments of docker's containers.create for the model server."""
    import docker

    mounts = {path: {"bind": path, "mode": "ro"} for path in [weights_dir, *launch.mounts]}
    requests = (
        [docker.types.DeviceRequest(device_ids=cards.split(","), capabilities=[["gpu"]])]
        if launch.device_requests and cards
        else []
    )
    return {
        "image": launch.image,
        "command": [*launch.command, *arguments],
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


def ensure_image(client: Any, image: str, archive: str | None = None) -> None:
    """The model server's image: loaded from ``archive`` (a ``docker save`` file) or pulled
    when this engine lacks it, saying so in the run log, with the pull's progress (docker
    SDK: ``APIClient.pull(stream=True, decode=True)`` yields one status dict per event)."""
    import docker

    try:
        client.images.get(image)
        return
    except docker.errors.ImageNotFound:
        pass
    if archive:
        log.info("image %s is not on this Docker engine: loading it from %s", image, archive)
        with open(archive, "rb") as handle:
            loaded = client.images.load(handle)
        log.info("loaded %s", ", ".join(tag for i in loaded for tag in i.tags) or "no tags")
        client.images.get(image)
        return
    log.info("image %s is not on this Docker engine: pulling it", image)
    repository, tag = docker.utils.parse_repository_tag(image)
    last = ""
    try:
        for event in client.api.pull(repository, tag=tag, stream=True, decode=True):
            if "error" in event:
                raise ServiceError(f"pulling {image} failed: {event['error']}")
            status = " ".join(str(event.get(k, "")) for k in ("id", "status", "progress"))
            if event.get("status") != "Downloading" or status[:40] != last[:40]:
                log.info("pull %s: %s", image, status.strip())
            last = status
    except docker.errors.APIError as error:
        raise ServiceError(
            f"model_server image {image} is not on this Docker engine and cannot be pulled "
            f"({error.explanation or error}); docker pull it (or docker load its archive) "
            "on this host, or set execution.model_server.launch.image to an image it has"
        ) from error
    client.images.get(image)
    log.info("image %s pulled", image)
