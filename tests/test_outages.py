"""A run that survives its servers: outages, dropped replies, refused requests, full disks.

Faults are injected by the project's own loopback servers (stopped and restarted on
their ports, or answering with a fault); the client under test is the real one.
"""

from __future__ import annotations

import errno
import json
import random
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from skilleval.errors import CoverageError, DiskError, OutageError
from skilleval.logs import logged
from skilleval.runs import journal as journal_module
from skilleval.runs.evaluation import evaluate
from skilleval.serving.http import JsonClient
from skilleval.serving.outage import RetryLedger, ServerCalls
from skilleval.world.server import Faults, WorldServers, start_servers
from tests.conftest import AS_LAUNCHED, protocol_values, read_jsonl, run_inputs, with_protocol
from tests.test_http_path import http_inputs, strip
from tests.test_progress import Terminal

SEED = 20260830


@pytest.fixture(scope="module")
def unfaulted(small_world: Path, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The in-process run every faulted run must equal, task by task."""
    out = tmp_path_factory.mktemp("unfaulted")
    evaluate(run_inputs(small_world), str(out / "r.jsonl"), str(out / "s.json"), str(out / "j"))
    return strip(read_jsonl(out / "r.jsonl"))


def serve(world: Path, **kwargs: Any) -> WorldServers:
    weights = world / "checkpoints" / "base" / "model.safetensors"
    kwargs.setdefault("server_args", AS_LAUNCHED)
    return start_servers(str(weights), str(world), SEED, **kwargs)


def run(world: Path, servers: WorldServers, out: Path, budget_s: float = 600) -> dict[str, Any]:
    inputs = http_inputs(world, servers.model_url, servers.env_url)
    protocol = protocol_values(inputs)
    protocol["execution"]["outage_budget_s"] = budget_s
    inputs = with_protocol(inputs, protocol)
    return evaluate(inputs, str(out / "r.jsonl"), str(out / "s.json"), str(out / "journal"))


def journaled(out: Path) -> int:
    return sum(len(p.read_text().splitlines()) for p in (out / "journal").rglob("*.jsonl"))


@pytest.fixture()
def outage() -> Iterator[Any]:
    """Stop a server once `after` tasks are journaled; restart it `down_s` later (if set)."""
    threads = []

    def start(
        servers: WorldServers, which: str, out: Path, after: int, down_s: float | None
    ) -> None:
        def cut() -> None:
            while journaled(out) < after:
                time.sleep(0.01)
            servers.stop(which)
            if down_s is not None:
                time.sleep(down_s)
                servers.restart(which)

        thread = threading.Thread(target=cut, daemon=True)
        thread.start()
        threads.append(thread)

    yield start
    for thread in threads:
        thread.join(timeout=30)


@pytest.mark.parametrize("which", ["env", "model"])
def test_a_ten_second_outage_is_waited_out(
    small_world: Path, tmp_path: Path, unfaulted: list[dict[str, Any]], outage: Any, which: str
) -> None:
    servers = serve(small_world, faults=Faults(latency_s=0.02))
    outage(servers, which, tmp_path, after=8, down_s=10.0)
    start = time.monotonic()
    try:
        summary = run(small_world, servers, tmp_path)
    finally:
        servers.shutdown()
    assert time.monotonic() - start >= 10.0, "the outage did not happen during the run"
    assert summary["coverage"] == 1.0
    assert strip(read_jsonl(tmp_path / "r.jsonl")) == unfaulted
    retries = summary["provenance"]["execution"]["retries"]
    layer = "environment" if which == "env" else "model"
    assert retries.get(f"{layer}/connect", 0) > 0, retries


def test_an_outage_past_the_budget_stops_in_one_line_and_resumes(
    small_world: Path, tmp_path: Path, unfaulted: list[dict[str, Any]], outage: Any
) -> None:
    servers = serve(small_world, faults=Faults(latency_s=0.02))
    outage(servers, "env", tmp_path, after=8, down_s=None)
    try:
        with pytest.raises(OutageError) as stopped:
            run(small_world, servers, tmp_path, budget_s=2.0)
        message = str(stopped.value)
        assert "\n" not in message
        assert "environment server" in message and "past the outage budget of 2 s" in message
        assert "tasks finished" in message and str(tmp_path / "journal") in message
        assert "resume with: snakemake --cores 1 " + str(tmp_path / "s.json") in message
        assert not (tmp_path / "s.json").exists()
        servers.restart("env")
        summary = run(small_world, servers, tmp_path)  # another budget: the journal still counts
    finally:
        servers.shutdown()
    assert summary["coverage"] == 1.0
    assert summary["provenance"]["execution"]["reused_from_journal"] >= 8
    assert strip(read_jsonl(tmp_path / "r.jsonl")) == unfaulted


def test_a_dropped_step_reply_restarts_the_episode_and_never_repeats_the_step(
    small_world: Path, tmp_path: Path, unfaulted: list[dict[str, Any]]
) -> None:
    env_faults = Faults(rate=0.03, kinds=("drop_step",), rng=random.Random(1))
    servers = serve(small_world, env_faults=env_faults)
    try:
        summary = run(small_world, servers, tmp_path)
    finally:
        servers.shutdown()
    dropped = env_faults.injected["drop_step"]
    retries = summary["provenance"]["execution"]["retries"]
    assert dropped > 0
    assert env_faults.injected["step_after_dropped_reply"] == 0
    assert retries["environment/transport"] == dropped
    assert retries["episode/episode_restart"] == dropped
    assert summary["coverage"] == 1.0
    assert strip(read_jsonl(tmp_path / "r.jsonl")) == unfaulted


def test_retries_are_counted_by_layer_and_kind(small_world: Path, tmp_path: Path) -> None:
    faults = Faults(rate=0.2, kinds=("429", "503"), rng=random.Random(2))
    servers = serve(small_world, faults=faults)
    try:
        summary = run(small_world, servers, tmp_path)
    finally:
        servers.shutdown()
    retries = summary["provenance"]["execution"]["retries"]
    assert faults.injected["429"] > 0 and faults.injected["503"] > 0
    assert retries["model/429"] == faults.injected["429"]
    assert retries["model/5xx"] == faults.injected["503"]
    assert summary["coverage"] == 1.0


@pytest.mark.parametrize(
    ("kind", "reason", "error_text"),
    [
        ("malformed", "malformed_tool_call", "malformed tool call"),
        ("context_overflow", "context_overflow", "maximum context length"),
    ],
)
def test_model_errors_end_only_their_episode_and_are_named(
    small_world: Path, tmp_path: Path, kind: str, reason: str, error_text: str
) -> None:
    faults = Faults(rate=0.05, kinds=(kind,), rng=random.Random(3))
    servers = serve(small_world, faults=faults)
    try:
        summary = run(small_world, servers, tmp_path)
    finally:
        servers.shutdown()
    records = read_jsonl(tmp_path / "r.jsonl")
    ended = [r for r in records if r["stop_reason"] == reason]
    assert summary["coverage"] == 1.0 and ended
    assert summary["stop_reasons"][reason] == len(ended)
    assert all(error_text in r["error"] for r in ended)
    if kind == "context_overflow":  # every refused request ends exactly one episode
        assert len(ended) == faults.injected[kind]
    assert summary["task_errors"] >= len(ended)


def test_a_full_disk_stops_with_one_line_and_no_torn_journal_line(
    small_world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = journal_module.os.write
    appended = []

    def write(fd: int, data: bytes) -> int:
        if len(appended) >= 10:
            real_write(fd, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        appended.append(fd)
        return real_write(fd, data)

    monkeypatch.setattr(journal_module.os, "write", write)
    inputs = run_inputs(small_world)
    with pytest.raises(DiskError) as full:
        evaluate(inputs, str(tmp_path / "r.jsonl"), str(tmp_path / "s.json"), str(tmp_path / "j"))
    assert "\n" not in str(full.value)
    assert "no space left on the device" in str(full.value) and "df -h" in str(full.value)
    (journal,) = (tmp_path / "j").rglob("*.jsonl")
    assert str(journal) in str(full.value)
    lines = journal.read_text().splitlines()
    assert len(lines) == 10 and all(json.loads(line) for line in lines)
    monkeypatch.setattr(journal_module.os, "write", real_write)
    summary = evaluate(
        inputs, str(tmp_path / "r.jsonl"), str(tmp_path / "s.json"), str(tmp_path / "j")
    )
    assert summary["coverage"] == 1.0
    assert summary["provenance"]["execution"]["reused_from_journal"] == 10


def test_a_crashing_episode_is_listed_and_the_others_finish(
    small_world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    import skilleval.runs.evaluation as evaluation

    real = evaluation.run_episode
    inputs = run_inputs(small_world)
    victim = json.loads(Path(inputs.split_file).read_text())[inputs.split][0]["task_id"]

    def episode(policy: Any, environment: Any, task_id: str, *args: Any) -> Any:
        if task_id == victim:
            raise ValueError("a bug in one episode")
        return real(policy, environment, task_id, *args)

    monkeypatch.setattr(evaluation, "run_episode", episode)
    with pytest.raises(CoverageError, match=f"1 task\\(s\\) crashed \\({victim}#0: ValueError"):
        evaluate(inputs, str(tmp_path / "r.jsonl"), str(tmp_path / "s.json"), str(tmp_path / "j"))
    assert "Traceback" in caplog.text and "a bug in one episode" in caplog.text
    assert not (tmp_path / "r.jsonl").exists() and not (tmp_path / "s.json").exists()
    (journal,) = (tmp_path / "j").rglob("*.jsonl")
    assert len(journal.read_text().splitlines()) == 47


def test_failures_are_classified_from_urllib3_exceptions() -> None:
    """As urllib3/connectionpool.py's urlopen raises them with retries off."""
    import email.utils
    import http.client

    from urllib3 import exceptions

    from skilleval.serving.outage import StatusFailure, classify, retry_after

    cases = {
        "connect": [
            exceptions.NewConnectionError(None, "Connection refused"),  # type: ignore[arg-type]
            exceptions.ConnectTimeoutError(None, "connect timed out"),
        ],
        "timeout": [exceptions.ReadTimeoutError(None, "/v1", "Read timed out.")],  # type: ignore[arg-type]
        "transport": [
            exceptions.ProtocolError("Connection aborted.", http.client.RemoteDisconnected()),
            exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104)),
            exceptions.ProxyError("proxy down", OSError()),
        ],
        "429": [StatusFailure(429, {"Retry-After": "2"}, "slow down")],
        "5xx": [StatusFailure(503, {}, "busy")],
    }
    for kind, errors in cases.items():
        for error in errors:
            failure = classify(error)
            assert failure is not None and failure.kind == kind, (error, failure)
    assert classify(StatusFailure(404, {}, "missing")) is None
    assert classify(ValueError("a bug")) is None
    assert classify(exceptions.LocationParseError("http://[::1")) is None
    assert classify(exceptions.SSLError("certificate verify failed")) is None
    assert retry_after("2") == 2.0 and retry_after("soon") is None and retry_after(None) is None
    date = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= (retry_after(date) or 0) <= 31


def test_retry_after_is_honoured() -> None:
    from skilleval.serving.outage import RetryLedger, ServerCalls, StatusFailure

    ledger = RetryLedger()
    calls = ServerCalls("model", "http://test", ledger, budget_s=10, base_delay_s=0.01)
    replies = iter([StatusFailure(429, {"Retry-After": "0.4"}, "slow down"), "ok"])

    def request() -> str:
        reply = next(replies)
        if isinstance(reply, Exception):
            raise reply
        return reply

    start = time.monotonic()
    assert calls.call(request) == "ok"
    assert time.monotonic() - start >= 0.4
    assert ledger.snapshot() == {"model/429": 1}


def test_a_server_refusing_connections_is_said_on_the_terminal_at_once_with_its_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job's log is not the terminal (logs.logged): a refused connection is said there
    on the first failure, not only once the outage budget is spent."""
    terminal = Terminal()
    monkeypatch.setattr(sys, "__stderr__", terminal)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens on it
    client = JsonClient(f"http://127.0.0.1:{port}", 1.0, 1)
    calls = ServerCalls("model", f"http://127.0.0.1:{port}/v1", RetryLedger(), budget_s=1.0)
    with logged(str(tmp_path / "job.log")), pytest.raises(OutageError):
        calls.call(lambda: client.get("/v1/models"))
    assert len(terminal.writes) == 1, terminal.writes  # once at first, then every 30 s
    (said,) = terminal.writes
    assert said.startswith(f"skilleval: model server http://127.0.0.1:{port}/v1 unreachable")
    assert "execution.outage_budget_s" in said and "refused" in said.lower()
