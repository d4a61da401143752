"""Who owns a model-server container, without a Docker engine (tests/test_docker.py has one)."""

from __future__ import annotations

import socket
import subprocess
import sys

from skilleval.protocol.sections import Launch
from skilleval.serving.containers import LABEL, OWNER, container_labels, container_spec
from skilleval.serving.owners import owner_alive, owner_token


def test_an_owner_is_alive_only_while_its_process_runs() -> None:
    assert owner_alive(owner_token())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    token = owner_token(child.pid)
    assert owner_alive(token)
    child.wait()
    assert not owner_alive(token)


def test_a_reused_pid_is_not_the_owner() -> None:
    host, pid, _ = owner_token().rsplit(":", 2)
    assert not owner_alive(f"{host}:{pid}:1")


def test_an_owner_on_another_host_is_never_judged_gone() -> None:
    assert owner_alive(f"not-{socket.gethostname()}:1:1")


def test_labels_and_spec_name_run_cards_port_and_mounts() -> None:
    labels = container_labels("base-S0", "3,4", 30001)
    assert labels[f"{LABEL}.run"] == "base-S0" and labels[f"{LABEL}.cards"] == "3,4"
    assert labels[f"{LABEL}.port"] == "30001" and owner_alive(labels[OWNER])
    launch = Launch(image="img", command=["serve"], mounts=["/models/cache"], startup_timeout_s=5)
    spec = container_spec(launch, ["--port", "30001"], "/models/base", "3,4", labels)
    assert spec["command"] == ["serve", "--port", "30001"]
    assert spec["volumes"] == {
        "/models/base": {"bind": "/models/base", "mode": "ro"},
        "/models/cache": {"bind": "/models/cache", "mode": "ro"},
    }
    (request,) = spec["device_requests"]
    assert request["DeviceIDs"] == ["3", "4"] and request["Capabilities"] == [["gpu"]]
    assert spec["network_mode"] == "host" and spec["labels"] == labels
