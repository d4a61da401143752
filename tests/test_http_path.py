"""The real path end to end on loopback: OpenAI client, HTTP environment, service checks."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from skilleval.errors import ServiceError
from skilleval.runs.evaluation import evaluate
from skilleval.world.server import Faults, start_servers
from tests.conftest import (
    AS_LAUNCHED,
    protocol_values,
    read_jsonl,
    run_inputs,
    stand_in_server,
    with_protocol,
)

FIELDS = ("task_id", "reward", "r_success", "steps", "stop_reason")


def strip(records: list[dict[str, object]]) -> list[dict[str, object]]:
    return [{k: r[k] for k in FIELDS} for r in records]


def http_inputs(world: Path, model_url: str, env_url: str, **protocol_changes: object):  # type: ignore[no-untyped-def]
    inputs = run_inputs(world)
    protocol = protocol_values(inputs)
    execution = protocol["execution"]
    execution["model_server"].update(base_url=model_url, request_timeout_s=30)
    for key, value in protocol_changes.items():
        section = execution if key in execution["model_server"] else protocol
        section["model_server"][key] = value
    execution["environment"]["url"] = env_url
    backends = {"policy": "openai", "environment": "http", "model_server": "external"}
    return with_protocol(inputs, protocol, backends=backends)


@pytest.fixture()
def servers(small_world: Path):  # type: ignore[no-untyped-def]
    weights = small_world / "checkpoints" / "base" / "model.safetensors"
    started = start_servers(str(weights), str(small_world), seed=20260830, server_args=AS_LAUNCHED)
    yield started
    started.shutdown()


def test_http_run_equals_in_process_run(small_world: Path, servers, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    local = evaluate(
        run_inputs(small_world),
        str(tmp_path / "a.jsonl"),
        str(tmp_path / "a.json"),
        str(tmp_path / "j1"),
    )
    remote = evaluate(
        http_inputs(small_world, servers.model_url, servers.env_url),
        str(tmp_path / "b.jsonl"),
        str(tmp_path / "b.json"),
        str(tmp_path / "j2"),
    )
    assert strip(read_jsonl(tmp_path / "b.jsonl")) == strip(read_jsonl(tmp_path / "a.jsonl"))
    assert remote["service"]["unchanged"] and remote["service"]["start"]["server"]["tp_size"] == 1
    assert remote["reward"] == local["reward"]


def test_faults_are_retried_to_full_coverage(small_world: Path, tmp_path: Path) -> None:
    weights = small_world / "checkpoints" / "base" / "model.safetensors"
    faulty = start_servers(
        str(weights),
        str(small_world),
        20260830,
        faults=Faults(rate=0.2, kinds=("429", "503", "slow"), slow_s=0.05),
        server_args=AS_LAUNCHED,
    )
    try:
        summary = evaluate(
            http_inputs(small_world, faulty.model_url, faulty.env_url),
            str(tmp_path / "r.jsonl"),
            str(tmp_path / "s.json"),
            str(tmp_path / "j"),
        )
    finally:
        faulty.shutdown()
    records = read_jsonl(tmp_path / "r.jsonl")
    assert summary["coverage"] == 1.0
    assert len(records) == len({r["task_id"] for r in records}) == 48


def test_api_key_is_never_written(
    small_world: Path,
    servers,
    tmp_path: Path,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = "sk-test-5f0c1e8b9d7a4c2e"
    monkeypatch.setenv("SKILLEVAL_TEST_KEY", secret)
    inputs = http_inputs(
        small_world, servers.model_url, servers.env_url, api_key_env="SKILLEVAL_TEST_KEY"
    )
    evaluate(
        inputs,
        str(tmp_path / "results" / "r.jsonl"),
        str(tmp_path / "results" / "s.json"),
        str(tmp_path / "results" / "journal"),
    )
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret not in path.read_text(errors="ignore"), path


def test_missing_api_key_is_a_clear_error(small_world: Path, servers, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from skilleval.errors import SkillevalError

    inputs = http_inputs(
        small_world, servers.model_url, servers.env_url, api_key_env="SKILLEVAL_UNSET_KEY"
    )
    with pytest.raises(SkillevalError, match=r"\$SKILLEVAL_UNSET_KEY, which is not set"):
        evaluate(inputs, str(tmp_path / "r"), str(tmp_path / "s"), str(tmp_path / "j"))


def test_a_keyed_server_is_checked_with_the_protocols_key_and_never_recorded(
    small_world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sglang 0.5.23 with --api-key guards /model_info, /server_info and /v1/models too."""
    secret = "sk-lab-0c5e9a7d3b1f"
    weights = small_world / "checkpoints" / "base" / "model.safetensors"
    keyed = start_servers(
        str(weights), str(small_world), 20260830, server_args={**AS_LAUNCHED, "api_key": secret}
    )
    try:
        monkeypatch.setenv("SKILLEVAL_LAB_KEY", secret)
        inputs = http_inputs(
            small_world, keyed.model_url, keyed.env_url, api_key_env="SKILLEVAL_LAB_KEY"
        )
        summary = evaluate(
            inputs, str(tmp_path / "ok" / "r"), str(tmp_path / "ok" / "s"), str(tmp_path / "j")
        )
        assert summary["coverage"] == 1.0 and summary["service"]["unchanged"]
        launched = summary["service"]["start"]["server"]["launch_command"]
        assert "--api-key <hidden>" in launched
        for path in tmp_path.rglob("*"):
            assert not path.is_file() or secret not in path.read_text(errors="ignore"), path
        monkeypatch.setenv("SKILLEVAL_LAB_KEY", "sk-wrong")
        with pytest.raises(ServiceError) as wrong:
            evaluate(inputs, str(tmp_path / "r"), str(tmp_path / "s"), str(tmp_path / "j2"))
        assert "answered HTTP 401: the API key is missing or wrong" in str(wrong.value)
        assert "$SKILLEVAL_LAB_KEY (execution.model_server.api_key_env)" in str(wrong.value)
        no_key = r"sends no key \(execution.model_server.api_key_env: null"
        with pytest.raises(ServiceError, match=no_key):
            evaluate(
                http_inputs(small_world, keyed.model_url, keyed.env_url, api_key_env=None),
                str(tmp_path / "r"),
                str(tmp_path / "s"),
                str(tmp_path / "j3"),
            )
    finally:
        keyed.shutdown()


def test_wrong_parser_on_the_server_is_refused(small_world: Path, tmp_path: Path) -> None:
    weights = small_world / "checkpoints" / "base" / "model.safetensors"
    wrong = start_servers(
        str(weights),
        str(small_world),
        20260830,
        server_args={**AS_LAUNCHED, "tool_call_parser": "hermes"},
    )
    try:
        with pytest.raises(ServiceError, match="tool_call_parser is 'hermes'"):
            evaluate(
                http_inputs(small_world, wrong.model_url, wrong.env_url),
                str(tmp_path / "r"),
                str(tmp_path / "s"),
                str(tmp_path / "j"),
            )
    finally:
        wrong.shutdown()
    assert not (tmp_path / "s").exists()


def test_wrong_checkpoint_on_the_server_is_refused(small_world: Path, tmp_path: Path) -> None:
    final = small_world / "checkpoints" / "final" / "model.safetensors"
    served = start_servers(str(final), str(small_world), 20260830, server_args=AS_LAUNCHED)
    try:
        with pytest.raises(ServiceError, match=r"serves .*final, but the run's checkpoint is"):
            evaluate(
                http_inputs(small_world, served.model_url, served.env_url),
                str(tmp_path / "r"),
                str(tmp_path / "s"),
                str(tmp_path / "j"),
            )
    finally:
        served.shutdown()


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_launched_server_runs_on_leased_gpus_and_is_stopped(
    small_world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """model_server: process with a stand-in for sglang (same flags), on fake GPUs 1-3."""
    port, env_port = free_port(), free_port()
    inputs = http_inputs(
        small_world,
        f"http://127.0.0.1:{port}/v1",
        f"http://127.0.0.1:{env_port}",
        dp_size=2,
        launch={
            "command": stand_in_server(small_world, env_port),
            "image": "skilleval/unused:none",
            "startup_timeout_s": 60,
        },
    )
    inputs = replace(inputs, backends={**inputs.backends, "model_server": "process"})
    monkeypatch.setenv("SKILLEVAL_GPU_DEVICES", "1-3")
    summary = evaluate(
        inputs, str(tmp_path / "r.jsonl"), str(tmp_path / "s.json"), str(tmp_path / "j")
    )
    assert summary["coverage"] == 1.0
    assert summary["service"]["start"]["server"]["dp_size"] == 2
    time.sleep(0.5)
    leftover = subprocess.run(["pgrep", "-f", "--", f"--env-port {env_port}"], capture_output=True)
    assert leftover.returncode == 1, "the model server outlived its run"
    import socket

    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0, "its port still answers"
    assert os.environ.get("CUDA_VISIBLE_DEVICES") in (None, "")
