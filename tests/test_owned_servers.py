"""Servers a job owns on a shared GPU host: own port, label, orphans stopped, other users.

The stand-in for sglang is the project's test server (tests/conftest.py, stand_in_server),
started by the real launcher with sglang's flags, --served-model-name included.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from skilleval.errors import GpuLeaseError, ServiceError
from skilleval.protocol.sections import Launch, ModelServer
from skilleval.runs.evaluation import evaluate
from skilleval.runs.inputs import RunInputs
from skilleval.serving.gpu import SCHEDULER_CARDS_VARIABLE, gpu_lease, job_environment, job_lease
from skilleval.serving.launcher import owned_server, wait_healthy
from skilleval.serving.owners import process_start
from skilleval.serving.processes import (
    PORT_SLOTS,
    PORT_STRIDE,
    SGLANG_PORT_OFFSETS,
    port_lease,
    port_stride,
    read_labels,
    sglang_ports,
)
from skilleval.workflow.commands import clean_servers
from skilleval.world.server import start_servers
from tests.conftest import REPO, stand_in_server
from tests.test_http_path import free_port, http_inputs


@pytest.fixture()
def lock_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A 14-card host whose jobs may lease cards 1-13, and a lock directory of the test's
    own under /tmp (which every user may traverse), made by the code under test."""
    directory = Path("/tmp") / f"skilleval-test-locks-{uuid.uuid4().hex[:8]}"
    (tmp_path / "bin").mkdir()
    fake_host(tmp_path / "bin", 14, monkeypatch)
    monkeypatch.setenv("SKILLEVAL_GPU_LOCK_DIR", str(directory))
    monkeypatch.setenv("SKILLEVAL_GPU_DEVICES", "1-13")
    yield directory
    subprocess.run(["rm", "-rf", str(directory)], check=False)


def process_inputs(world: Path, run: str, base_port: int, *options: str) -> RunInputs:
    env_port = free_port()
    inputs = http_inputs(
        world,
        f"http://127.0.0.1:{base_port}/v1",
        f"http://127.0.0.1:{env_port}",
        launch={
            "command": stand_in_server(world, env_port, *options),
            "image": "skilleval/unused:none",
            "startup_timeout_s": 60,
        },
    )
    return replace(inputs, run=run, backends={**inputs.backends, "model_server": "process"})


def test_every_job_starts_with_no_card_and_pci_bus_order() -> None:
    environ = {"CUDA_VISIBLE_DEVICES": "0,1,2"}
    job_environment(environ)
    assert environ == {"CUDA_VISIBLE_DEVICES": "", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def test_a_slurm_jobs_cards_are_kept_for_its_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    environ = {"SLURM_JOB_ID": "77", "CUDA_VISIBLE_DEVICES": "0,1"}
    job_environment(environ)
    assert environ["CUDA_VISIBLE_DEVICES"] == "" and environ[SCHEDULER_CARDS_VARIABLE] == "77=0,1"
    job_environment(environ)  # the job's own Snakemake parses the Snakefile again
    assert environ[SCHEDULER_CARDS_VARIABLE] == "77=0,1"
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("SKILLEVAL_GPU_DEVICES", raising=False)
    with job_lease(2) as lease:
        assert lease.visible_devices == "0,1"
    # a parent allocation's cards are not this job's
    monkeypatch.setenv("SLURM_JOB_ID", "78")
    with pytest.raises(GpuLeaseError, match="given 0"), job_lease(1):
        pass


def test_profile_cards_must_be_cards_nvidia_smi_lists(
    tmp_path: Path, lock_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_host(tmp_path, 8, monkeypatch)
    assert shutil.which("nvidia-smi") == str(tmp_path / "nvidia-smi")
    with pytest.raises(GpuLeaseError, match=r"allow cards \[8, 9, 10, 11, 12, 13\]"), job_lease(1):
        pass
    fake_host(tmp_path, 14, monkeypatch)
    with job_lease(4) as lease:
        assert lease.devices == (1, 2, 3, 4)


def fake_host(folder: Path, cards: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """An nvidia-smi on PATH that lists ``cards`` cards, as the real one prints them."""
    write_nvidia_smi(folder, cards)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")


def write_nvidia_smi(folder: Path, cards: int) -> Path:
    lines = "\\n".join(f"{i}, GPU-{i:08d}-fake" for i in range(cards))
    stub = folder / "nvidia-smi"
    stub.write_text(f"#!/bin/sh\nprintf '{lines}\\n'\n")
    stub.chmod(0o755)
    return stub


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as a second user")
def test_a_second_user_leases_from_the_same_lock_directory(lock_dir: Path) -> None:
    previous = os.umask(0o077)  # the first user's umask must not lock the second one out
    try:
        with gpu_lease(2, range(1, 14)) as first:
            assert first.devices == (1, 2)
    finally:
        os.umask(previous)
    assert (lock_dir.stat().st_mode & 0o7777) == 0o777
    assert all((p.stat().st_mode & 0o777) == 0o666 for p in lock_dir.glob("gpu-*.lock"))
    read, write = os.pipe()
    # The first user holds card 3 before the second one starts, so the second one's lease
    # cannot race it for the card (a lock taken before fork stays the parent's).
    with gpu_lease(1, [3]):
        child = os.fork()
        if child == 0:  # the second user: nobody, leasing while the first user holds card 3
            try:
                os.close(read)
                os.setgid(65534)
                os.setuid(65534)
                with gpu_lease(1, [1]) as held, gpu_lease(2, range(1, 14)) as second:
                    reply = [list(held.devices), list(second.devices)]
                    os.write(write, json.dumps(reply).encode())
            except BaseException as error:
                os.write(write, json.dumps(repr(error)).encode())
            finally:
                os._exit(0)
        os.close(write)
        os.waitpid(child, 0)
    reply = json.loads(os.read(read, 4096))
    assert reply == [[1], [2, 4]], reply
    # The card the second user's lock file was made for (card 4) leases for the first user too.
    assert (lock_dir / "gpu-4.lock").stat().st_uid == 65534
    with gpu_lease(1, [4]) as again:
        assert again.devices == (4,)


def test_a_health_check_answered_by_another_server_is_refused(small_world: Path) -> None:
    weights = small_world / "checkpoints" / "base" / "model.safetensors"
    other = start_servers(str(weights), str(small_world), seed=1)
    try:
        with pytest.raises(ServiceError, match="another process holds the port"):
            wait_healthy(other.model_url, "skilleval/base-S0/gpu1/port1/pid1", 10, lambda: True, {})
    finally:
        other.shutdown()


def test_a_port_in_use_is_skipped(lock_dir: Path) -> None:
    import socket

    base = free_port()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", base))
        busy.listen()
        with port_lease(base, lock_dir) as first, port_lease(base, lock_dir) as second:
            assert (first, second) == (base + PORT_STRIDE, base + 2 * PORT_STRIDE)


def test_no_two_servers_ports_ever_meet() -> None:
    """sglang derives ports from its HTTP port; the stride keeps every slot's apart."""
    base = 30000
    ports = [sglang_ports(base + slot * PORT_STRIDE) for slot in range(PORT_SLOTS)]
    for i, mine in enumerate(ports):
        for theirs in ports[i + 1 :]:
            assert not mine & theirs
    assert sglang_ports(base) >= {base + 233, base + 239, base + 13}
    # the stride is the least that works: one less lets two servers meet
    shorter = [sglang_ports(base + slot * (PORT_STRIDE - 1)) for slot in range(PORT_SLOTS)]
    assert any(a & b for i, a in enumerate(shorter) for b in shorter[i + 1 :])
    assert port_stride((0, 5), 6) == 2 and port_stride(SGLANG_PORT_OFFSETS, 2) == 7


CHILD = """
import pickle, sys
from skilleval.runs.evaluation import evaluate
inputs = pickle.load(open(sys.argv[1], "rb"))
evaluate(inputs, sys.argv[2] + "/r.jsonl", sys.argv[2] + "/s.json", sys.argv[2] + "/journal")
"""


def test_a_killed_runs_server_is_stopped_before_the_next_run_leases(
    small_world: Path, tmp_path: Path, lock_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    base = free_port()
    slow = process_inputs(small_world, "base-S0", base, "--latency", "0.2")
    (tmp_path / "inputs.pickle").write_bytes(pickle.dumps(slow))
    job = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path / "inputs.pickle"), str(tmp_path)],
        cwd=REPO,
        stderr=(tmp_path / "job.log").open("w"),
    )
    deadline = time.monotonic() + 60
    # A task in the journal: the server is up (the journal itself is opened before it).
    while time.monotonic() < deadline and not any(
        p.stat().st_size for p in (tmp_path / "journal").rglob("*.jsonl")
    ):
        time.sleep(0.2)
    time.sleep(1.0)
    assert job.poll() is None, (tmp_path / "job.log").read_text()
    job.send_signal(signal.SIGKILL)
    job.wait()
    [(_, orphan)] = read_labels(lock_dir)
    assert orphan.server_alive(), "the orphan should outlive its SIGKILLed job"
    assert orphan.port == base and orphan.run == "base-S0"
    assert clean_servers("base-S0", "list") == [f"server pid {orphan.pid} (port {base})"]
    assert clean_servers("final-ST", "list") == []

    caplog.set_level("INFO")
    summary = evaluate(
        process_inputs(small_world, "base-S0", base),
        str(tmp_path / "r.jsonl"),
        str(tmp_path / "s.json"),
        str(tmp_path / "journal"),
    )
    messages = [r.getMessage() for r in caplog.records]
    stopped = next(i for i, m in enumerate(messages) if f"pid {orphan.pid}" in m)
    started = next(i for i, m in enumerate(messages) if m.startswith("model server pid"))
    assert "left by run base-S0" in messages[stopped] and stopped < started
    assert process_start(orphan.pid) is None
    assert summary["coverage"] == 1.0
    assert summary["service"]["start"]["models"] == [served_name(summary)]
    assert read_labels(lock_dir) == [], "a finished run leaves no label"


def served_name(summary: dict[str, Any]) -> str:
    name = str(summary["service"]["start"]["model_info"]["served_model_name"])
    assert name.startswith(f"skilleval/{summary['run']}/gpu") and "/port" in name
    return name


def test_two_runs_at_once_get_their_own_ports_and_both_complete(
    small_world: Path, tmp_path: Path, lock_dir: Path
) -> None:
    base = free_port()
    summaries: dict[str, dict[str, Any]] = {}

    def run(name: str) -> None:
        summaries[name] = evaluate(
            process_inputs(small_world, name, base, "--latency", "0.01"),
            str(tmp_path / f"{name}.jsonl"),
            str(tmp_path / f"{name}.json"),
            str(tmp_path / "journal"),
        )

    threads = [threading.Thread(target=run, args=(n,)) for n in ("base-S0", "base-free")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert sorted(summaries) == ["base-S0", "base-free"]
    urls = {s["service"]["start"]["base_url"] for s in summaries.values()}
    assert urls == {f"http://127.0.0.1:{p}/v1" for p in (base, base + PORT_STRIDE)}
    assert all(s["coverage"] == 1.0 for s in summaries.values())
    first, second = (
        set(served_name(s).split("/gpu")[1].split("/")[0].split("-")) for s in summaries.values()
    )
    assert len(first) == len(second) == 4 and not first & second and "0" not in first | second


def test_a_run_whose_result_is_kept_starts_no_server_and_leases_no_card(
    small_world: Path, tmp_path: Path, lock_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    inputs = process_inputs(small_world, "base-S0", free_port())
    results, summary, journal = (str(tmp_path / n) for n in ("r.jsonl", "s.json", "journal"))
    caplog.set_level("INFO")
    first = evaluate(inputs, results, summary, journal)
    launched = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("GPU lease: devices") for m in launched)
    assert any(m.startswith("model server pid") for m in launched)
    assert first["service"]["start"]["models"] == [served_name(first)]
    built = {p: Path(p).read_bytes() for p in (results, summary)}
    for path in built:
        Path(path).unlink()  # Snakemake deletes a job's outputs before it runs it
    leases = {p.name: p.stat().st_mtime_ns for p in lock_dir.iterdir()}
    caplog.clear()

    evaluate(inputs, results, summary, journal)
    messages = [r.getMessage() for r in caplog.records]
    assert any("no card leased, no server started" in m for m in messages)
    assert not any(
        m.startswith(("GPU lease", "model server", "run base-S0: GPUs")) for m in messages
    )
    assert {p.name: p.stat().st_mtime_ns for p in lock_dir.iterdir()} == leases
    assert read_labels(lock_dir) == []
    assert {p: Path(p).read_bytes() for p in built} == built


@pytest.mark.parametrize(
    ("engine", "command"),
    [("sglang", ["python", "-m", "sglang.launch_server"]), ("vllm", ["vllm", "serve"])],
)
def test_an_engine_is_never_started_on_a_checkpoint_it_cannot_load(
    small_world: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    engine: str,
    command: list[str],
) -> None:
    """The simulated world's checkpoint names no architectures in its config.json, which
    sglang and vLLM need: the job refuses before it leases a card or a port (the stand-in,
    not the engine, may serve it)."""
    monkeypatch.setenv("SKILLEVAL_GPU_LOCK_DIR", str(tmp_path / "locks"))
    weights = str(small_world / "checkpoints" / "base" / "model.safetensors")
    launch = Launch(command=command, image="", startup_timeout_s=5)
    server = ModelServer(tp=1, dp_size=1, tool_call_parser=None, reasoning_parser=None,
                         base_url="http://127.0.0.1:30000/v1", api_key_env=None,
                         request_timeout_s=10, launch=launch, engine=engine)  # fmt: skip
    refused = pytest.raises(
        ServiceError,
        match=rf"config\.json is missing or names no architectures, so {engine} cannot serve",
    )
    with refused, owned_server("process", "base-S0", weights, server):
        pass
    assert not list((tmp_path / "locks").glob("gpu-*.lock"))
