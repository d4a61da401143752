"""model_server: docker on a real Docker engine: the project's test server in a container of a
locally built image, started, checked, run against, stopped and removed; and a job killed
with SIGKILL, whose container the next start removes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from skilleval.config.loading import merge
from skilleval.errors import ServiceError
from skilleval.protocol.sections import Launch
from skilleval.serving.containers import (
    LABEL,
    OWNER,
    container_labels,
    container_spec,
    ensure_image,
)
from tests.conftest import REPO, copy_workflow, load_default_config, stand_in_server, unfreeze
from tests.engine_docker import IMAGE, DockerEngine, host_mounts
from tests.engine_slurm import free_port

pytestmark = pytest.mark.docker
RUN = "base-free"


def skilleval_containers(engine: DockerEngine) -> list[Any]:
    return list(engine.client().containers.list(all=True, filters={"label": [OWNER]}))


def test_the_container_asks_docker_for_exactly_the_leased_cards(
    docker_engine: DockerEngine, tmp_path: Path
) -> None:
    """Checked on a created container: with no NVIDIA runtime here it could not start."""
    launch = Launch(image=IMAGE, command=["true"], startup_timeout_s=5)
    spec = container_spec(
        launch, ["--port", "1"], str(tmp_path), "1,2", container_labels(RUN, "1,2", 1)
    )
    container = docker_engine.client().containers.create(**spec)
    try:
        host_config = docker_engine.client().api.inspect_container(container.id)["HostConfig"]
        requests = host_config["DeviceRequests"]
        assert [(r["DeviceIDs"], r["Capabilities"]) for r in requests] == [(["1", "2"], [["gpu"]])]
        assert host_config["NetworkMode"] == "host"
        assert container.labels[f"{LABEL}.cards"] == "1,2"
        assert container.labels[f"{LABEL}.run"] == RUN
    finally:
        container.remove(force=True)
    no_gpus = container_spec(
        launch.model_copy(update={"device_requests": False}), [], str(tmp_path), "1,2", {}
    )
    assert no_gpus["device_requests"] == []


ARCHIVED = "skilleval-test-server:archived"


def image_archive(engine: DockerEngine, folder: Path) -> Path:
    """A docker save archive of the test image under a tag the engine then lacks, as a
    host without registry access would be handed the pinned image."""
    client = engine.client()
    client.images.get(IMAGE).tag(*ARCHIVED.split(":"))
    archive = folder / "image.tar"
    with archive.open("wb") as handle:
        for chunk in client.images.get(ARCHIVED).save(named=True):
            handle.write(chunk)
    client.images.remove(ARCHIVED)
    return archive


def test_a_missing_image_that_cannot_be_pulled_is_a_clear_error(
    docker_engine: DockerEngine,
) -> None:
    with pytest.raises(ServiceError, match="is not on this Docker engine and cannot be pulled"):
        ensure_image(docker_engine.client(), "skilleval-test-server:never-built")


def docker_workflow(workdir: Path, archive: Path) -> None:
    """The small world; base-free served by the test server in a container (slowed, so a
    kill lands mid-run) on two leased cards, from an image the engine must load first."""
    small = yaml.safe_load((REPO / "tests" / "data" / "small.yaml").read_text())
    config = merge(load_default_config(), small)
    config["ablation"] = load_default_config()["ablation"]
    config["backends"] = {"policy": "openai", "environment": "http", "model_server": "docker"}
    model_port, env_port = free_port(), free_port()
    protocol = config["protocols"]["local-sglang"]
    protocol["execution"]["environment"]["url"] = f"http://127.0.0.1:{env_port}"
    protocol["model_server"]["dp_size"] = 2
    protocol["execution"]["model_server"]["base_url"] = f"http://127.0.0.1:{model_port}/v1"
    protocol["execution"]["model_server"]["launch"] = {
        "image": ARCHIVED,
        "image_archive": str(archive),
        "command": stand_in_server(workdir / "results" / "world", env_port, "--latency", "0.05"),
        "startup_timeout_s": 120,
        "mounts": host_mounts(REPO, workdir),
        "device_requests": False,
    }
    (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    unfreeze(workdir)


def journal_tasks(workdir: Path) -> int:
    return sum(
        len(path.read_text().splitlines())
        for path in (workdir / "results" / "journal").rglob("*.jsonl")
    )


def test_a_killed_run_leaves_a_container_the_next_start_removes(
    docker_engine: DockerEngine, tmp_path: Path
) -> None:
    workdir = copy_workflow(tmp_path)
    docker_workflow(workdir, image_archive(docker_engine, tmp_path))
    env = {**docker_engine.env, "SKILLEVAL_GPU_DEVICES": "1-3"}
    target = f"results/runs/{RUN}/summary.json"
    command = [sys.executable, "-m", "snakemake", "-j", "2", target]
    first = subprocess.Popen(
        command,
        cwd=workdir,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    while not (skilleval_containers(docker_engine) and journal_tasks(workdir) >= 3):
        assert first.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline, "the run never got going"
        time.sleep(0.5)
    os.killpg(first.pid, signal.SIGKILL)  # the job, its Snakemake and all they started
    first.wait()
    first_log = (workdir / "results" / "logs" / "runs" / f"{RUN}.log").read_text()
    assert f"image {ARCHIVED} is not on this Docker engine: loading it from" in first_log

    (leftover,) = skilleval_containers(docker_engine)
    leftover.reload()
    assert leftover.status == "running" and leftover.labels[f"{LABEL}.run"] == RUN
    listed = subprocess.run(
        [sys.executable, "-m", "skilleval.cli", "clean", RUN],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
    )
    assert f"container {leftover.name}" in listed.stdout, listed.stdout + listed.stderr
    assert skilleval_containers(docker_engine), "clean without --archive/--delete removed it"

    subprocess.run([*command, "--unlock"], cwd=workdir, env=env, check=True, capture_output=True)
    second = subprocess.run(
        [*command, "--rerun-incomplete"], cwd=workdir, env=env, capture_output=True, text=True
    )
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    log = (workdir / "results" / "logs" / "runs" / f"{RUN}.log").read_text()
    assert f"removing container {leftover.name} left by run {RUN}" in log
    assert skilleval_containers(docker_engine) == [], "the finished run left its container"
    summary = yaml.safe_load((workdir / target).read_text())
    assert summary["coverage"] == 1.0
    assert summary["service"]["start"]["server"]["dp_size"] == 2
    print(
        f"Docker engine up in {docker_engine.started_s:.1f} s, image imported in "
        f"{docker_engine.image_s:.1f} s"
    )
