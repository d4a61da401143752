"""A lab's own environment adapter as a plug-in, and the live contract check.

The lab adapter is tests/data/lab_env, a package outside skilleval installed into the test
venv by the README's test command and registered as the entry point ``lab-shop``: the
template of docs/templates/lab_environment filled in for skilleval serve-world's server.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import urllib3
import yaml

from skilleval.config.model import Config
from skilleval.env.adapters import find_adapter, make_adapter
from skilleval.errors import CoverageError, SkillevalError
from skilleval.runs import evaluation
from skilleval.runs.backends import refuse_broken_environment
from skilleval.workflow.env_check import env_check
from skilleval.world.server import JsonHandler, start_servers
from tests.conftest import REPO, protocol_values, run_inputs, snakemake, with_protocol

LAB_ENV = REPO / "tests" / "data" / "lab_env"


@contextmanager
def environment_server(world: Path) -> Iterator[str]:
    weights = world / "checkpoints" / "base" / "model.safetensors"
    servers = start_servers(str(weights), str(world), seed=20260830)
    try:
        yield servers.env_url
    finally:
        servers.shutdown()


def test_the_lab_adapter_is_found_by_its_entry_point_without_running_it() -> None:
    found = find_adapter("lab-shop")
    assert found.target == "lab_env.adapter:LabShop"
    assert (found.distribution, found.version) == ("skilleval-test-lab-env", "0.1.0")
    assert Path(found.module_file).resolve() == (LAB_ENV / "lab_env" / "adapter.py").resolve()
    assert found.package_digest in found.identity and str(LAB_ENV) not in found.identity
    assert find_adapter("lab_env.adapter:LabShop").package_digest == found.package_digest
    with pytest.raises(SkillevalError) as refused:
        find_adapter("lab-shopp")
    said = str(refused.value)
    assert "no such entry point, and not an import path (did you mean lab-shop?)" in said
    assert "group (lab-shop)" in said and "fix: install the adapter's package" in said


def test_a_job_refuses_an_adapter_changed_after_planning() -> None:
    planned = find_adapter("lab-shop").identity
    settings = {"url": "http://127.0.0.1:5700", "slots": 2}
    made = make_adapter("lab-shop", planned, settings)  # the planned code: made
    assert type(made).__name__ == "LabShop" and made.url == settings["url"]
    changed = planned.replace("sha256:", "sha256:0")
    with pytest.raises(SkillevalError, match="changed after the graph was planned") as refused:
        make_adapter("lab-shop", changed, settings)
    assert "re-run snakemake" in str(refused.value)


def lab_overlay(url: str) -> str:
    protocol = {"execution": {"environment": {"url": url}}}
    overlay = {"backends": {"environment": "lab-shop"}, "protocols": {"local-sglang": protocol}}
    return yaml.safe_dump(overlay)


@pytest.mark.slow
def test_a_lab_adapter_builds_the_paper_and_its_code_is_in_every_runs_identity(
    small_paper: Path, tmp_path: Path
) -> None:
    """The small paper, built with the built-in adapter, moved to the lab's: every model
    run is certain (a new adapter identity), the rest is kept."""
    workdir = small_paper
    lab = ("--configfile", "config/small.yaml", "config/lab.yaml")
    stale = [sys.executable, "-m", "skilleval.cli", "stale", "--json", "paper", *lab]

    def certain(env: dict[str, str] | None = None) -> set[str]:
        done = subprocess.run(stale, cwd=workdir, capture_output=True, text=True, env=env)
        planned = json.loads(done.stdout)
        runs = [job for job in planned if job["rule"] in ("eval_run", "gate_masked_run")]
        assert all(job["cost"]["kind"] == "certain" for job in runs), runs
        return {o for job in runs for o in job["outputs"] if o.endswith("summary.json")}

    built = {*(workdir / "results" / "runs").glob("*/summary.json")}
    built |= {*(workdir / "results" / "gate").rglob("summary.json")}
    every_model_run = {str(path.relative_to(workdir)) for path in built}
    with environment_server(workdir / "results" / "world") as url:
        (workdir / "config" / "lab.yaml").write_text(lab_overlay(url))
        assert certain() == every_model_run
        snakemake(workdir, "-j", "2", "paper", *lab)
        assert certain() == set()
        # An edit to the adapter's second module (its scoring, not the entry point), then to
        # the other top-level package its distribution installs (the grading scale its
        # scoring imports): each copy found first on the path.
        dry = [sys.executable, "-m", "snakemake", "-n", "paper", *lab]
        for package, module in (("lab_env", "scoring.py"), ("lab_grading", "__init__.py")):
            edited = tmp_path / f"edited-{package}"
            shutil.copytree(LAB_ENV / package, edited / package)
            source = edited / package / module
            source.write_text(source.read_text() + "# edited: the same behaviour, new code\n")
            moved = {**os.environ, "PYTHONPATH": f"{edited}{os.pathsep}{workdir}"}
            assert certain(moved) == every_model_run, package
            said = subprocess.run(dry, cwd=workdir, capture_output=True, text=True, env=moved)
            assert said.returncode == 0, said.stderr
            assert all(run in said.stdout for run in every_model_run), said.stdout
    summary = json.loads((workdir / "results/runs/base-S0/summary.json").read_text())
    assert summary["coverage"] == 1.0
    assert summary["backends"] == {
        "environment": "lab-shop",
        "environment_adapter": find_adapter("lab-shop").identity,
        "model_server": "none",
        "policy": "sim",
    }


class BrokenShop(JsonHandler):
    """The environment wire (skilleval/env/wire.py) with one thing broken, by ``broken``."""

    broken = ""

    def do_GET(self) -> None:
        if self.path == "/info":
            function = {"name": "search", "parameters": {"type": "object"}}
            tool = {"type": "function", "function": function}
            tools = ["search"] if self.broken == "tools" else [tool]
            self.reply(200, {"slots": 8, "world": "broken", "tools": tools})
        else:  # rewards
            reward = 1.7 if self.broken == "reward" else 0.5
            declared = dict.fromkeys(("r_strict", "r_category", "r_budget", "r_attrs"), 0.5)
            self.reply(200, {"reward": reward, "r_success": 0.0, **declared})

    def do_POST(self) -> None:
        request = self.body()
        if self.path == "/episodes":
            task = request["task_id"]
            self.reply(200, {"episode_id": f"e-{task}", "instruction": f"Buy for {task}."})
        elif self.broken == "step" or (self.broken == "one step" and not self.server.failed):
            self.server.failed = True  # type: ignore[attr-defined]
            self.reply(500, {"error": "Internal Server Error"})
        else:
            self.reply(200, {"observation": "no such product", "done": False})

    def do_DELETE(self) -> None:
        self.reply(200, {})


@contextmanager
def broken_server(broken: str) -> Iterator[str]:
    handler = type("Broken", (BrokenShop,), {"broken": broken})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.failed = False  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def world_config(world: Path, url: str, environment: str = "http") -> Config:
    """The shipped config on ``world``, its environment at ``url`` through ``environment``."""
    inputs = run_inputs(world)
    config: dict[str, Any] = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["world"]["dir"] = str(world)
    protocol = config["protocols"]["local-sglang"]
    protocol["tasks"]["split_file"] = inputs.split_file
    protocol["prompt"]["system"] = inputs.system_prompt_file
    protocol["prompt"]["skill_template"] = inputs.skill_template_file
    protocol["execution"]["environment"]["url"] = url
    config["backends"]["environment"] = environment
    return Config.model_validate(config)


@pytest.mark.parametrize("adapter", ["http", "lab-shop"])
def test_env_check_passes_against_serve_world(small_world: Path, adapter: str) -> None:
    with environment_server(small_world) as url:
        checked = env_check(world_config(small_world, url, adapter))
    assert checked.violations == [], checked.report()
    assert "keeps the contract" in checked.report() and len(checked.task_ids) == 3


def test_env_check_refuses_the_adapter_the_run_refuses_with_the_same_words(
    small_world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An adapter whose declared metrics leave out one the protocol declares: the run
    refuses it before any episode, and env check says the same instead of passing it."""
    (tmp_path / "short_lab.py").write_text(
        "from lab_env.adapter import LabShop\n\n\n"
        "class ShortShop(LabShop):\n"
        "    metrics = {'reward': (0.0, 1.0), 'r_success': (0.0, 1.0)}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with environment_server(small_world) as url:
        checked = env_check(world_config(small_world, url, "short_lab:ShortShop"))
        inputs = run_inputs(small_world)
        protocol = protocol_values(inputs)
        protocol["execution"]["environment"] = {"url": url}
        short = {**inputs.backends, "environment": "short_lab:ShortShop"}
        with pytest.raises(SkillevalError) as refused:
            refuse_broken_environment(with_protocol(inputs, protocol, backends=short), "t")
    said = str(refused.value)
    assert "declares metrics ['r_success', 'reward'] but the protocol" in said
    assert [v.rule for v in checked.violations][:1] == [4], checked.report()
    assert str(checked.violations[0]) in said and "keeps the contract" not in checked.report()


def test_env_check_without_a_server_says_what_it_waited_and_how_to_wait_longer(
    small_world: Path,
) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{free.getsockname()[1]}"
    with pytest.raises(SkillevalError) as absent:
        env_check(world_config(small_world, url))
    said = str(absent.value)
    assert f"the environment server {url} did not answer within --wait 0 s" in said
    assert "give --wait SECONDS" in said and "outage budget" not in said


BREAKS = {
    "tools": ("tool 0 is not {'type': 'function', 'function': {...}}", "unique names"),
    "reward": ("reward = 1.7 is outside [0, 1]", "'reward' in [0, 1]"),
    "step": ("step('search', {}) raised InfrastructureError", "answer an unknown tool"),
}


@pytest.mark.parametrize("broken", sorted(BREAKS))
def test_env_check_names_each_violation_of_a_broken_server_with_its_fix(
    small_world: Path, broken: str
) -> None:
    problem, fix = BREAKS[broken]
    with broken_server(broken) as url:
        checked = env_check(world_config(small_world, url))
    report = checked.report()
    assert any(problem in str(v) for v in checked.violations), report
    assert "  fix of rule " in report and fix in report, report


@pytest.mark.usefixtures("no_card_leased")
def test_a_model_run_on_a_broken_environment_stops_before_it_leases_a_card(
    small_world: Path, tmp_path: Path
) -> None:
    with broken_server("tools") as url:
        inputs = run_inputs(small_world)
        protocol = protocol_values(inputs)
        protocol["execution"]["environment"] = {"url": url}
        inputs = with_protocol(
            inputs,
            protocol,
            backends={**inputs.backends, "environment": "http", "model_server": "process"},
        )
        with pytest.raises(SkillevalError) as refused:
            evaluation.evaluate(inputs, *(str(tmp_path / name) for name in ("r", "s", "j")))
    said = str(refused.value)
    assert "breaks the contract" in said and "before it leases a card" in said
    assert "tool 0 is not" in said and "fix: tools() must return" in said
    assert not (tmp_path / "s").exists()


@contextmanager
def failing_one_task(upstream: str, task: str) -> Iterator[str]:
    """The lab's server behind a proxy that answers HTTP 500 to every start of ``task``
    and passes every other request through."""
    pool = urllib3.PoolManager()

    class OneTaskFails(JsonHandler):
        def relay(self, method: str) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if method == "POST" and self.path == "/episodes" and task.encode() in body:
                self.reply(500, {"error": "Internal Server Error"})
                return
            answer = pool.request(method, upstream + self.path, body=body or None)
            self.send_response(answer.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer.data)))
            self.end_headers()
            self.wfile.write(answer.data)

        def do_GET(self) -> None:
            self.relay("GET")

        def do_POST(self) -> None:
            self.relay("POST")

        def do_DELETE(self) -> None:
            self.relay("DELETE")

    server = ThreadingHTTPServer(("127.0.0.1", 0), OneTaskFails)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_env_check_reports_one_failed_step_as_transient_not_as_a_breach(
    small_world: Path,
) -> None:
    """The server answers 500 to one step once, as a passing fault does: a run restarts
    that episode, so env check tries the step again and keeps the contract."""
    with broken_server("one step") as url:
        checked = env_check(world_config(small_world, url))
    report = checked.report()
    assert checked.breaches == [] and "keeps the contract" in report, report
    assert "transient: step('search', {}) raised InfrastructureError" in report, report
    assert "it passed when tried again" in report and "fix of rule" not in report


def test_one_task_the_lab_server_always_fails_is_that_task_s_failure_not_an_outage(
    small_world: Path, tmp_path: Path
) -> None:
    """The lab server answers 500 to one task of 48 every time and serves the rest: the run
    keeps the 47, ends within a minute instead of waiting out its 10-minute outage budget,
    and fails its gate naming the task; the same command resumes it."""
    inputs = run_inputs(small_world)
    tasks = json.loads(Path(inputs.split_file).read_text())["test"]
    failing = tasks[len(tasks) // 2]["task_id"]
    with environment_server(small_world) as upstream, failing_one_task(upstream, failing) as url:
        protocol = protocol_values(inputs)
        protocol["execution"]["environment"] = {"url": url}
        adapter = {
            "environment": "lab-shop",
            "environment_adapter": find_adapter("lab-shop").identity,
        }
        inputs = with_protocol(inputs, protocol, backends={**inputs.backends, **adapter})
        outputs = [str(tmp_path / name) for name in ("results.jsonl", "summary.json", "journal")]
        started = time.monotonic()
        with pytest.raises(CoverageError) as gate:
            evaluation.evaluate(inputs, *outputs)
        took = time.monotonic() - started
    said = str(gate.value)
    assert took < 60, f"{took:.0f} s"
    assert "1 task(s) failed on infrastructure" in said and f"{failing}#0" in said, said
    assert "failed this request the same way 3 times while answering others" in said
    assert "re-run to resume" in said
    (journal,) = Path(outputs[2]).glob("*/*.jsonl")
    kept = {json.loads(line).get("task_id") for line in journal.read_text().splitlines()}
    assert kept - {None} == {t["task_id"] for t in tasks} - {failing}
    assert not Path(outputs[1]).exists()


def test_the_template_adapter_lists_what_to_fill(tmp_path: Path) -> None:
    """The shipped template imports, and each call it leaves to the lab says so."""
    shutil.copytree(REPO / "docs" / "templates" / "lab_environment", tmp_path / "template")
    sys.path.insert(0, str(tmp_path / "template"))
    try:
        from lab_environment.adapter import LabEnvironment  # type: ignore[import-not-found]

        environment = LabEnvironment({"url": "http://lab:5700", "slots": 4, "options": {}})
        with pytest.raises(NotImplementedError, match=r"FILL LabEnvironment\.tools"):
            environment.tools()
    finally:
        sys.path.remove(str(tmp_path / "template"))
        sys.modules.pop("lab_environment.adapter", None)
        sys.modules.pop("lab_environment", None)
