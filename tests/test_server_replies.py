"""What a run does with replies that are no outage: a request the server refuses, a
model it must choose, an identity endpoint too busy to answer in time. The servers here are
minimal OpenAI-compatible endpoints that answer as vLLM's does where they answer (owned_by
"vllm", vllm/entrypoints/openai/protocol.py ModelCard); the real third-party server's
cases are in tests/test_real_server.py."""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import urllib3

from skilleval.analysis.contrast import RunRecords, validity_checks
from skilleval.env.rollout import EpisodeResult
from skilleval.errors import InfrastructureError, OutageError, ServerRefusal, ServiceError
from skilleval.policy.openai_policy import OpenAIPolicy
from skilleval.records.runs import RunSummary
from skilleval.runs.evaluation import evaluate
from skilleval.runs.inputs import RunInputs
from skilleval.runs.journal import Journal
from skilleval.runs.runner import run_episodes
from skilleval.runs.transcripts import read_transcripts
from skilleval.serving.engines import ENGINES
from skilleval.serving.http import JsonClient
from skilleval.serving.outage import RetryLedger, ServerCalls
from skilleval.serving.service import fetch_identity
from skilleval.world.server import Faults, KillableServer, start_servers
from tests.conftest import (
    AS_LAUNCHED,
    environment_server,
    protocol_values,
    run_inputs,
    shipped_sampling,
    with_protocol,
)


@pytest.fixture(scope="module")
def env_url(small_world: Path) -> Iterator[str]:
    with environment_server(small_world) as url:
        yield url


def against(
    world: Path, model_url: str, env: str, budget_s: float = 60, timeout_s: float = 0.5
) -> RunInputs:
    inputs = run_inputs(world, "base-free")
    protocol = protocol_values(inputs)
    protocol["model_server"]["identity"] = "trust"
    execution = protocol["execution"]
    execution["model_server"].update(base_url=model_url, request_timeout_s=timeout_s)
    execution["environment"]["url"] = env
    execution["outage_budget_s"] = budget_s
    backends = {"policy": "openai", "environment": "http", "model_server": "external"}
    return with_protocol(inputs, protocol, backends=backends)


def test_a_refused_preflight_stops_the_run_before_its_first_episode(
    small_world: Path, env_url: str, tmp_path: Path
) -> None:
    server = FakeModels(["m"])
    inputs = against(small_world, server.url, env_url)
    started = time.monotonic()
    with pytest.raises(ServerRefusal, match="unexpected"):
        evaluate(inputs, str(tmp_path / "r"), str(tmp_path / "s"), str(tmp_path / "journal"))
    assert time.monotonic() - started < 30
    assert server.posts == 3, "the preflight's request, sent until its refusal was plain"
    journals = list((tmp_path / "journal").rglob("*.jsonl"))
    assert all(path.stat().st_size == 0 for path in journals), "an episode ran"
    server.close()


def test_a_server_listing_two_models_without_a_named_one_is_refused(
    small_world: Path, env_url: str, tmp_path: Path
) -> None:
    server = FakeModels(["model-a", "model-b"])
    inputs = against(small_world, server.url, env_url)
    with pytest.raises(ServiceError, match=r"lists 2 models .*set model_server.model"):
        evaluate(inputs, str(tmp_path / "r"), str(tmp_path / "s"), str(tmp_path / "j"))
    assert server.posts == 0, "a request was sent before the refusal"
    server.close()


class FakeModels:
    """A server that lists models and counts chat requests, refusing them (500) or
    answering each with a message that calls no tool, its first ``slow_posts`` episode
    requests after ``delay_s``. /v1/models answers only after
    ``slow_for`` calls that take longer than the client waits, and from its
    ``slow_after``-th call on never in time (a busy llama.cpp answers /v1/models only
    between generations)."""

    def __init__(
        self,
        models: list[str],
        slow_for: int = 0,
        delay_s: float = 0.0,
        answers: bool = False,
        slow_after: int | None = None,
        slow_posts: int = 0,
        overflow_after: int | None = None,
    ) -> None:
        self.models, self.slow_for, self.delay_s = models, slow_for, delay_s
        self.answers, self.slow_after, self.slow_posts = answers, slow_after, slow_posts
        self.overflow_after = overflow_after
        self.posts = 0
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path == "/v1/models":
                    if owner.slow_after is not None:
                        owner.slow_after -= 1
                        if owner.slow_after < 0:
                            owner.slow_for = 1
                    if owner.slow_for > 0:
                        owner.slow_for -= 1
                        time.sleep(owner.delay_s)
                    body = {"data": [{"id": m, "owned_by": "vllm"} for m in owner.models]}
                    self.reply(200, body)
                else:
                    self.reply(404, {"detail": "Not Found"})

            def do_POST(self) -> None:
                owner.posts += 1
                request = self.rfile.read(int(self.headers["Content-Length"]))
                preflight = b"being checked" in request
                if not owner.answers:
                    self.reply(500, {"error": "unexpected"})
                    return
                if (
                    not preflight
                    and owner.overflow_after is not None
                    and owner.posts > owner.overflow_after
                ):
                    message = "This model's maximum context length is 2048 tokens"
                    self.reply(400, {"error": {"message": message}})
                    return
                if not preflight and owner.slow_posts > 0:
                    owner.slow_posts -= 1
                    time.sleep(owner.delay_s)
                message = {"role": "assistant", "content": "I cannot help."}
                choice = {"index": 0, "message": message, "finish_reason": "stop"}
                # vLLM counts the prompt it built: the messages and the tools' schemas
                usage = {"prompt_tokens": len(request) // 4, "completion_tokens": 4}
                self.reply(200, {"choices": [choice], "usage": usage})

            def reply(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        # A client that timed out on a slow reply has hung up by the time it is written:
        # the project's server passes over a connection the client cut, as serve-world does.
        self.server = KillableServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_busy_identity_endpoint_is_waited_out_not_called_unreachable() -> None:
    server = FakeModels(["m"], slow_for=2, delay_s=1.5)
    ledger = RetryLedger()
    calls = ServerCalls("model", server.url, ledger, budget_s=30)
    identity = fetch_identity(server.url, 0.5, calls)
    assert identity["models"] == ["m"]
    assert ledger.snapshot() == {"model/timeout": 2}
    server.close()


def test_an_identity_endpoint_that_never_answers_is_named_busy(tmp_path: Path) -> None:
    server = FakeModels(["m"], slow_for=1000, delay_s=1.0)
    calls = ServerCalls("model", server.url, RetryLedger(), budget_s=2)
    with pytest.raises(OutageError, match="not answering in time"):
        fetch_identity(server.url, 0.3, calls)
    server.close()


def test_a_run_whose_end_check_cannot_be_made_keeps_its_episodes_and_names_the_command(
    small_world: Path, env_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    command = "snakemake --configfile config/lab.yaml --profile profiles/gpu-host paper"
    monkeypatch.setenv("SKILLEVAL_BUILD_COMMAND", command)
    server = FakeModels(["m"], delay_s=1.0, answers=True, slow_after=1)
    inputs = against(small_world, server.url, env_url, budget_s=2)
    out = [str(tmp_path / "r.jsonl"), str(tmp_path / "s.json"), str(tmp_path / "journal")]
    with pytest.raises(OutageError) as stopped:
        evaluate(inputs, *out)
    message = str(stopped.value)
    assert "all 48 episodes are done and kept in" in message
    assert f"finish it with: {command} (no episode runs again)" in message
    assert "not answering in time" in message
    assert not (tmp_path / "s.json").exists()
    posts = server.posts
    server.slow_after = None
    summary = evaluate(inputs, *out)
    assert summary["coverage"] == 1.0
    assert summary["provenance"]["execution"]["reused_from_journal"] == 48
    assert server.posts == posts, "an episode ran again"
    server.close()


def test_a_malformed_tool_call_s_raw_text_is_in_the_transcript(
    small_world: Path, tmp_path: Path
) -> None:
    weights = small_world / "checkpoints" / "base" / "model.safetensors"
    faults = Faults(rate=0.3, kinds=("malformed",))
    servers = start_servers(
        str(weights), str(small_world), 20260830, faults=faults, server_args=AS_LAUNCHED
    )
    try:
        inputs = against(small_world, servers.model_url, servers.env_url)
        protocol = protocol_values(inputs)
        protocol["model_server"]["identity"] = "verify"
        protocol["execution"]["model_server"]["request_timeout_s"] = 30
        inputs = with_protocol(inputs, protocol)
        out = tmp_path / "run"
        evaluate(
            inputs,
            str(out / "r.jsonl"),
            str(out / "s.json"),
            str(tmp_path / "journal"),
            transcripts_path=str(out / "t.jsonl.gz"),
        )
    finally:
        servers.shutdown()
    episodes = read_transcripts(out / "t.jsonl.gz")
    malformed = [e for e in episodes if e["stop_reason"] == "malformed_tool_call"]
    assert malformed, "no fault was injected"
    calls = [c for m in malformed[0]["messages"] for c in m.get("tool_calls") or []]
    assert any(c["function"]["arguments"] == "{not json" for c in calls)


def test_requests_re_sent_after_their_timeout_are_counted_and_fail_the_verdict_check(
    small_world: Path, env_url: str, tmp_path: Path
) -> None:
    """Three chat requests take longer than the client waits: each is sent again, a new
    sample; the run says how many, per episode and in all, and a contrast's check fails.
    The client waits 3 s, not the other tests' 0.5 s: on a loaded 2-core host an instant
    reply took longer than 0.5 s, and its re-send was counted with the planted three."""
    server = FakeModels(["m"], delay_s=6.0, answers=True, slow_posts=3)
    inputs = against(small_world, server.url, env_url, timeout_s=3.0)
    out = [str(tmp_path / "r.jsonl"), str(tmp_path / "s.json"), str(tmp_path / "journal")]
    summary = evaluate(inputs, *out)
    server.close()
    assert summary["coverage"] == 1.0
    resent = summary["resent_after_timeout"]
    assert resent["requests"] == 3 and 1 <= resent["episodes"] <= 3, resent
    records = [json.loads(line) for line in Path(out[0]).read_text().splitlines()]
    assert sum(r["resent_after_timeout"] for r in records) == 3
    run = RunRecords(summary["run"], RunSummary.read(out[1]), records)
    checks = {c.name: c for c in validity_checks(run, run)}
    check = checks["resent_after_timeout_treatment"]
    assert not check.passed and "3 model request(s) re-sent" in check.detail, check
    assert "request_timeout_s" in check.detail
    # A summary that does not say how many were re-sent is no evidence that none were.
    uncounted = replace(run, summary=run.summary.model_copy(update={"resent_after_timeout": None}))
    unknown = {c.name: c for c in validity_checks(uncounted, uncounted)}
    assert not unknown["resent_after_timeout_control"].passed
    assert "no count of re-sent requests" in unknown["resent_after_timeout_control"].detail


def test_a_run_whose_every_episode_was_refused_fails_quoting_the_server(
    small_world: Path, env_url: str, tmp_path: Path
) -> None:
    """The preflight passes, then the server refuses every episode's request (a context
    too short for the tools): the run measured nothing and says so, no summary."""
    server = FakeModels(["m"], answers=True, overflow_after=1)
    inputs = against(small_world, server.url, env_url)
    out = [str(tmp_path / "r.jsonl"), str(tmp_path / "s.json"), str(tmp_path / "journal")]
    with pytest.raises(ServerRefusal) as refused:
        evaluate(inputs, *out)
    server.close()
    said = str(refused.value)
    assert "refused a request in all 48 episodes" in said and "maximum context length" in said
    assert "skilleval clean base-free --archive" in said
    assert not Path(out[1]).exists()


def test_a_stopped_run_cuts_its_requests_in_flight_and_ends_within_seconds(
    tmp_path: Path,
) -> None:
    """One episode stops the run while the others wait on replies that take 30 s: they are
    cut (their connections closed, which vLLM, sglang and llama-server take as a cancel),
    so the run ends at once rather than when the slowest reply comes."""
    server = FakeModels(["m"], delay_s=30.0, answers=True, slow_posts=10**6)
    ledger = RetryLedger()
    sampling = shipped_sampling()
    policy = OpenAIPolicy(server.url, "m", sampling, None, 60.0, ledger, 60.0, 8, ENGINES["vllm"])

    def episode(task_id: str, repeat: int) -> EpisodeResult:
        if task_id == "stop":
            time.sleep(0.5)  # the others are waiting on their replies by now
            raise ServerRefusal("the server refuses this request")
        policy.complete([{"role": "user", "content": task_id}], [])
        raise AssertionError("a reply came: the request was not cut")

    keys = [("stop", 0), *((f"task-{i}", 0) for i in range(7))]
    started = time.monotonic()
    with Journal(tmp_path, "run", "fp", {}) as journal, pytest.raises(ServerRefusal):
        run_episodes(keys, episode, journal, 8, "cut-run", ledger=ledger)
    # the process exits once its episode threads end (concurrent.futures joins them)
    while any(t.name.startswith("ep-cut-run") for t in threading.enumerate()):
        assert time.monotonic() - started < 5, "an episode thread still waits on its reply"
        time.sleep(0.05)
    assert server.posts == 7
    server.close()


def test_a_request_the_client_gives_up_on_is_hung_up_at_the_server() -> None:
    """The cancel a run gives a server: the client closes the connection of a request it
    timed out on (urllib3/connectionpool.py closes a connection that did not exit cleanly),
    which vLLM, sglang and llama-server take as the request's abort."""
    listener = socket.create_server(("127.0.0.1", 0))
    hung_up = threading.Event()

    def server() -> None:
        connection, _ = listener.accept()
        with connection:
            request = b""  # the whole request (headers, then its body); no reply ever comes
            while b"\r\n\r\n" not in request:
                request += connection.recv(65536)
            head, _, body = request.partition(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            while len(body) < length:
                body += connection.recv(65536)
            connection.settimeout(10)
            if connection.recv(1) == b"":
                hung_up.set()

    threading.Thread(target=server, daemon=True).start()
    client = JsonClient(f"http://127.0.0.1:{listener.getsockname()[1]}/v1", 0.5, 1)
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        client.post("/chat/completions", {"model": "m", "messages": []})
    assert hung_up.wait(5), "the connection stayed open after the client gave up"
    listener.close()


def answered_meanwhile(calls: ServerCalls, error: Exception) -> Any:
    """A request that fails with ``error`` while another request of the run is answered,
    as one task among many that are served does."""

    def request() -> None:
        calls.call(lambda: "another task's reply")
        raise error

    return request


def test_one_request_the_server_keeps_failing_while_answering_others_is_its_task_s() -> None:
    calls = ServerCalls("environment", "http://lab", RetryLedger(), 60.0, 0.01, 0.02)
    failing = answered_meanwhile(calls, InfrastructureError("lab shop answered HTTP 500"))
    started = time.monotonic()
    with pytest.raises(InfrastructureError) as ended:
        calls.call(failing, outages=(InfrastructureError,), task="t-7")
    assert ended.value.kind == "task_failure" and time.monotonic() - started < 5
    assert "failed this request the same way 3 times while answering others" in str(ended.value)


def test_a_request_that_never_reached_the_server_is_an_outage_whatever_else_it_answered() -> None:
    """Refused connections are the server's failure, not the task's: waited out."""
    calls = ServerCalls("environment", "http://lab", RetryLedger(), 0.3, 0.01, 0.02)
    refused = urllib3.exceptions.NewConnectionError(None, "Connection refused")  # type: ignore[arg-type]
    with pytest.raises(OutageError) as waited:
        calls.call(answered_meanwhile(calls, refused), task="t-7")
    assert "past the outage budget" in str(waited.value) and waited.value.last_error
