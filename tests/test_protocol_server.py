"""The protocol as a server applies it: sampling pinned, the served model proven, long
episodes kept. The stand-in fills missing sampling parameters as sglang 0.5.23 does
(skilleval/world/server.py names the source of each rule)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import urllib3

from skilleval.errors import ServiceError
from skilleval.policy.openai_policy import sampling_body
from skilleval.report.notice import notice_of
from skilleval.runs.evaluation import evaluate
from skilleval.serving.engines import ENGINES
from skilleval.serving.engines.sglang import check_identity
from skilleval.serving.service import Service, fetch_identity
from skilleval.world.sampling import APPLIED_SAMPLING_PATH
from skilleval.world.server import Faults, start_servers
from skilleval.world.shopsim import TOOLS, Task
from tests.conftest import (
    AS_LAUNCHED,
    protocol_values,
    read_jsonl,
    shipped_sampling,
    with_protocol,
)
from tests.test_http_path import http_inputs
from tests.test_sglang_identity import (
    PROTOCOL,
    current,
    fixture,
    models_reply,
    serve,  # noqa: F401  (the fixture)
)

QWEN_GENERATION_CONFIG = '{"temperature": 0.7, "top_k": 20, "top_p": 0.95, "do_sample": true}'


def chat(base_url: str, world: Path, body: dict[str, Any]) -> None:
    """One chat turn on the first val task, with ``body``'s sampling fields."""
    task = Task.from_json(json.loads((world / "persona_splits.v1.json").read_text())["val"][0])
    messages = [{"role": "user", "content": task.instruction}]
    request = {"model": "m", "messages": messages, "tools": TOOLS, **body}
    reply = urllib3.request("POST", base_url + "/chat/completions", json=request, timeout=30)
    assert reply.status == 200, reply.data


def applied(servers: Any) -> list[dict[str, Any]]:
    root = servers.model_url.removesuffix("/v1")
    return [
        entry["applied"] for entry in urllib3.request("GET", root + APPLIED_SAMPLING_PATH).json()
    ]


@pytest.fixture()
def qwen_like_checkpoint(small_world: Path, tmp_path: Path) -> Path:
    """The world's base checkpoint with a Qwen3-style generation_config.json beside it."""
    folder = tmp_path / "qwen-like"
    shutil.copytree(small_world / "checkpoints" / "base", folder)
    (folder / "generation_config.json").write_text(QWEN_GENERATION_CONFIG)
    return folder / "model.safetensors"


def test_the_project_s_requests_get_the_protocol_whatever_the_server_defaults(
    small_world: Path, qwen_like_checkpoint: Path
) -> None:
    sampling = shipped_sampling()
    body = sampling_body(sampling, None, ENGINES["sglang"])
    # sglang's default, --sampling-defaults model: what the checkpoint ships fills the gaps
    servers = start_servers(str(qwen_like_checkpoint), str(small_world), 1)
    try:
        chat(servers.model_url, small_world, body)
        chat(servers.model_url, small_world, {"max_tokens": 64})
        protocol, bare = applied(servers)
    finally:
        servers.shutdown()
    assert protocol == {
        "temperature": 0.6,
        "top_p": 1.0,
        "top_k": -1,
        "min_p": 0.0,
        "repetition_penalty": 1.0,
    }
    assert bare == {
        "temperature": 0.7,
        "top_p": 0.95,
        "top_k": 20,
        "min_p": 0.0,
        "repetition_penalty": 1.0,
    }
    # as the launcher starts it: a gap gets OpenAI's defaults, never the checkpoint's
    servers = start_servers(str(qwen_like_checkpoint), str(small_world), 1, server_args=AS_LAUNCHED)
    try:
        chat(servers.model_url, small_world, {"max_tokens": 64})
        (bare,) = applied(servers)
    finally:
        servers.shutdown()
    assert (bare["temperature"], bare["top_p"], bare["top_k"]) == (1.0, 1.0, -1)


def server_info(**changes: Any) -> dict[str, Any]:
    return {**fixture("server_info"), **changes}


@pytest.mark.parametrize(
    ("replies", "problem"),
    [
        ({"/v1/models": models_reply("x")}, "answers none of sglang's identity endpoint pairs"),
        (
            {
                **current(model_path=None),
                "/server_info": server_info(model_path=None),
            },
            "does not report model_path",
        ),
        (
            {
                **current(model_path="/ckpt/iter_60/hf"),
                "/server_info": server_info(model_path="/ckpt/iter_60/hf"),
            },
            "serves /ckpt/iter_60/hf, but the run's checkpoint is /ckpt/iter_80/hf",
        ),
        (
            {**current(), "/server_info": server_info(sampling_defaults="model")},
            "sampling_defaults is 'model', the protocol requires 'openai'",
        ),
        (
            {**current(), "/server_info": server_info(sampling_defaults=None)},
            "does not report sampling_defaults",
        ),
    ],
)
def test_a_server_that_cannot_prove_what_it_serves_is_refused(
    serve: Any,  # noqa: F811
    replies: dict[str, Any],
    problem: str,
) -> None:
    """Each field missing or wrong, one case each; a checkpoint path that does not exist
    here, as a server's often does not."""
    url, asked = serve(replies)
    service = Service("openai", "final", "/ckpt/iter_80/hf/model.safetensors", url, PROTOCOL)
    service.identity = lambda: fetch_identity(url)  # type: ignore[method-assign]
    with pytest.raises(ServiceError, match="does not match the run") as refused:
        service.check()
    assert problem in str(refused.value)
    assert "/v1/chat/completions" not in asked


def test_an_unreporting_server_stops_a_real_run_before_its_first_request(
    serve: Any,  # noqa: F811
    small_world: Path,
    tmp_path: Path,
) -> None:
    url, asked = serve({"/v1/models": models_reply("proxy")})
    with pytest.raises(ServiceError, match="identity: trust"):
        evaluate(
            http_inputs(small_world, url, "http://127.0.0.1:9"),
            str(tmp_path / "r.jsonl"),
            str(tmp_path / "s.json"),
            str(tmp_path / "journal"),
        )
    # The journal is opened (and locked) before the server is asked; it holds no task.
    journals = list((tmp_path / "journal").rglob("*.jsonl"))
    assert all(j.stat().st_size == 0 for j in journals), "no task may have started"
    assert "/v1/chat/completions" not in asked


def test_identity_trust_runs_unchecked_and_says_so(small_world: Path, tmp_path: Path) -> None:
    weights = small_world / "checkpoints" / "base" / "model.safetensors"
    servers = start_servers(
        str(weights), str(small_world), 20260830, server_args={"sampling_defaults": "model"}
    )
    try:
        inputs = http_inputs(small_world, servers.model_url, servers.env_url)
        with pytest.raises(ServiceError, match="sampling_defaults is 'model'"):
            evaluate(inputs, str(tmp_path / "a.jsonl"), str(tmp_path / "a.json"), str(tmp_path))
        trusted = http_inputs(small_world, servers.model_url, servers.env_url, identity="trust")
        summary = evaluate(
            trusted, str(tmp_path / "r.jsonl"), str(tmp_path / "s.json"), str(tmp_path / "j")
        )
    finally:
        servers.shutdown()
    assert summary["service"]["identity_check"] == "trusted" and summary["coverage"] == 1.0
    # The notice reads the run's own record: a trusted server, and (from what that server
    # said it is) the project's simulated world.
    notice = notice_of([str(tmp_path / "s.json")])
    assert "trusted without an identity check" in notice and "base-S0" in notice
    assert summary["simulated"]["simulated"] is True
    assert "skilleval serve-world" in summary["simulated"]["by"]
    assert "every evaluation number comes from the simulated shopping world" in notice


def test_a_verified_server_is_recorded_as_verified(small_world: Path, tmp_path: Path) -> None:
    weights = small_world / "checkpoints" / "base" / "model.safetensors"
    servers = start_servers(str(weights), str(small_world), 20260830, server_args=AS_LAUNCHED)
    try:
        summary = evaluate(
            http_inputs(small_world, servers.model_url, servers.env_url),
            str(tmp_path / "r.jsonl"),
            str(tmp_path / "s.json"),
            str(tmp_path / "j"),
        )
    finally:
        servers.shutdown()
    assert summary["service"]["identity_check"] == "verified"
    assert summary["service"]["start"]["server"]["sampling_defaults"] == "openai"
    assert summary["service"]["start"]["model_info"]["preferred_sampling_params"] is None


def test_a_long_episode_ends_as_timeout_and_is_scored_not_resampled(
    small_world: Path, tmp_path: Path
) -> None:
    weights = small_world / "checkpoints" / "base" / "model.safetensors"
    servers = start_servers(
        str(weights),
        str(small_world),
        20260830,
        faults=Faults(latency_s=0.05),
        server_args=AS_LAUNCHED,
    )
    inputs = http_inputs(small_world, servers.model_url, servers.env_url)
    protocol = protocol_values(inputs)
    protocol["runtime"]["episode_timeout_s"] = 0.12
    try:
        summary = evaluate(
            with_protocol(inputs, protocol),
            str(tmp_path / "r.jsonl"),
            str(tmp_path / "s.json"),
            str(tmp_path / "j"),
        )
    finally:
        servers.shutdown()
    timeouts = summary["stop_reasons"].get("timeout", 0)
    assert timeouts > 0 and summary["coverage"] == 1.0
    assert summary["provenance"]["execution"]["infra_retries"] == 0, "a slow episode restarted"
    ended = [r for r in read_jsonl(tmp_path / "r.jsonl") if r["stop_reason"] == "timeout"]
    assert len(ended) == timeouts and all(r["error"] is None for r in ended)
    assert all("reward" in r for r in ended), "a timed-out episode is scored as it stands"


def test_check_identity_compares_the_whole_path() -> None:
    identity = {
        "identity_endpoints": "current: /model_info, /server_info",
        "model_info": {**fixture("model_info"), "model_path": "/ckpt/iter_60/hf"},
        "server": server_info(model_path="/ckpt/iter_60/hf"),
    }
    problems = check_identity(identity, PROTOCOL, "/ckpt/iter_80/hf/model.safetensors")
    assert any(p.startswith("serves /ckpt/iter_60/hf") for p in problems)


def test_a_launch_line_with_a_quote_is_a_clear_refusal_not_a_crash() -> None:
    """sglang records " ".join(argv): a quote in a model path leaves it unbalanced."""
    launch = "python -m sglang.launch_server --model-path /ckpt/it's-80/hf --tp-size 1"
    identity = {
        "identity_endpoints": "current: /model_info, /server_info",
        "model_info": fixture("model_info"),
        "server": server_info(launch_command=launch),
    }
    problems = check_identity(identity, PROTOCOL, "/ckpt/iter_80/hf/model.safetensors")
    assert any("launch_command cannot be read as a command line" in p for p in problems)
