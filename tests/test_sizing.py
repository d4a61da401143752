"""What a model run's cluster job asks for, from its protocol (serving.sizing)."""

from __future__ import annotations

import json
from pathlib import Path

from skilleval.protocol.sections import ModelServer
from skilleval.serving.sizing import run_job_size, sglang_processes
from tests.conftest import load_default_config

PROTOCOL = load_default_config()["protocols"]["local-sglang"]
# The model server as a run sees it (RunInputs.model_server): what it serves, how it starts.
SERVER = ModelServer.model_validate(
    {**PROTOCOL["model_server"], **PROTOCOL["execution"]["model_server"]}
)


def test_sglang_processes_follow_its_launcher() -> None:
    # sglang 0.5.23 engine.py: a scheduler per card, a DP controller when dp > 1,
    # the detokenizer and the main (tokenizer manager) process.
    assert sglang_processes(tp=1, dp=4) == 4 + 1 + 2
    assert sglang_processes(tp=2, dp=1) == 2 + 2


def test_a_launched_server_sizes_the_job_from_tp_dp_weights_and_start_up(tmp_path: Path) -> None:
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"\0" * (3 * 2**20))
    size = run_job_size("process", SERVER, [str(weights)], tmp_path / "no-summary.json")
    cards = SERVER.tp * SERVER.dp_size
    assert size.cpus_per_task == 1 + sglang_processes(SERVER.tp, SERVER.dp_size)
    assert size.mem_mb == 4000 + cards * 6000 + 3
    # not measured yet: the start-up limit plus six hours
    assert size.runtime == (SERVER.launch.startup_timeout_s + 6 * 3600) // 60


def test_a_measured_run_asks_for_twice_its_last_wall_time(tmp_path: Path) -> None:
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"provenance": {"execution": {"wall_s": 1800.0}}}))
    size = run_job_size("process", SERVER, [], summary)
    assert size.runtime == (SERVER.launch.startup_timeout_s + 3600) // 60


def test_an_external_server_leaves_the_job_only_the_agent(tmp_path: Path) -> None:
    size = run_job_size("external", SERVER, [], tmp_path / "summary.json")
    assert (size.cpus_per_task, size.mem_mb, size.runtime) == (1, 4000, 360)
