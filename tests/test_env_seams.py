"""What a lab's adapter hands a run is checked where the run uses it (issue: the seams hold).

The lab adapter is tests/data/lab_env (a package outside skilleval, installed into the test
venv), served by skilleval serve-world's environment server. Its grades are mapped onto
metrics in a second module, ``lab_env.scoring``, as a lab with a points scale does.
"""

from __future__ import annotations

import itertools
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import lab_env.adapter
import lab_env.scoring
import pytest

from skilleval.env.adapters import find_adapter
from skilleval.env.contract import contract_violations
from skilleval.env.metrics import MetricContract
from skilleval.env.rollout import EpisodeResult
from skilleval.errors import ConfigError, ContractBreach, SkillevalError
from skilleval.runs import evaluation
from skilleval.runs.inputs import RunInputs
from skilleval.runs.journal import Journal
from skilleval.runs.runner import RetryPolicy, RunStats, _Schedule
from skilleval.workflow.as_snakemake import snakemake_config
from skilleval.workflow.env_check import env_check
from skilleval.world.server import JsonHandler, KillableServer, start_servers
from tests.conftest import (
    AS_LAUNCHED,
    REPO,
    environment_server,
    protocol_values,
    read_jsonl,
    run_inputs,
    with_protocol,
)
from tests.test_lab_adapter import world_config


def lab_inputs(world: Path, url: str, **execution: Any) -> RunInputs:
    """base-S0 of the small world through the lab adapter at ``url``."""
    inputs = run_inputs(world)
    protocol = protocol_values(inputs)
    protocol["execution"] = {**protocol["execution"], "environment": {"url": url}, **execution}
    backends = {
        **inputs.backends,
        "environment": "lab-shop",
        "environment_adapter": find_adapter("lab-shop").identity,
    }
    return with_protocol(inputs, protocol, backends=backends)


def evaluate(inputs: RunInputs, root: Path) -> dict[str, Any]:
    return evaluation.evaluate(inputs, str(root / "r"), str(root / "s"), str(root / "j"))


def test_rewards_on_a_points_scale_stop_the_run_naming_key_and_value(
    small_world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lab maps its server's grades to 0-100 points: the first episode that scores
    stops the run in one line; episodes recorded before it stay in the journal."""
    monkeypatch.setattr(lab_env.scoring, "POINTS_PER_SHARE", 0.01)
    with environment_server(small_world) as url, pytest.raises(ContractBreach) as stopped:
        evaluate(lab_inputs(small_world, url), tmp_path)
    said = str(stopped.value)
    assert "\n" not in said and "'lab-shop'" in said and "rule 4" in said
    assert "r_success = 100.0 is not 0 or 1" in said or "is outside [0, 1]" in said, said
    assert not (tmp_path / "s").exists() and not (tmp_path / "r").exists()
    journal = next((tmp_path / "j" / "base-S0").glob("*.jsonl"))
    assert str(journal) in said  # what was recorded before the breach is kept there
    assert all(0.0 <= line["reward"] <= 1.0 for line in read_jsonl(journal))


def test_the_same_adapter_on_the_right_scale_completes_with_every_declared_metric(
    small_world: Path, tmp_path: Path
) -> None:
    with environment_server(small_world) as url:
        summary = evaluate(lab_inputs(small_world, url), tmp_path)
    declared = ["r_strict", "r_success", "r_category", "r_budget", "r_attrs"]
    assert summary["coverage"] == 1.0
    assert set(summary["metrics"]) == {"reward", *declared}
    assert all(0.0 <= summary[name] <= 1.0 for name in declared)


@pytest.mark.usefixtures("no_card_leased")
def test_a_protocol_metric_the_adapter_does_not_declare_is_refused_before_work(
    small_world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    declared = {"reward": (0, 1), "r_success": (0, 1), "r_strict": (0, 1)}
    monkeypatch.setattr(lab_env.adapter.LabShop, "metrics", declared, raising=False)
    with environment_server(small_world) as url, pytest.raises(SkillevalError) as refused:
        evaluate(lab_inputs(small_world, url), tmp_path)
    said = str(refused.value)
    assert "protocol 'local-sglang' declares 'r_category'" in said, said
    assert "r_category, r_budget, r_attrs missing" in said and "before it leases a card" in said
    assert not (tmp_path / "s").exists()


def test_a_declared_range_is_the_one_checked() -> None:
    class Points:
        metrics: ClassVar = {"r_points": (0, 100)}

    contract = MetricContract.of("reward", ["r_success", "r_points"], "'lab'", Points.metrics)
    assert contract.violations({"reward": 0.5, "r_success": 1.0, "r_points": 73.0}) == []
    assert contract.violations({"reward": 0.5, "r_success": 1.0, "r_points": 101.0}) == [
        "r_points = 101.0 is outside [0, 100]"
    ]
    # The contract's own metrics keep their ranges whatever the adapter declares.
    wide = MetricContract.of("reward", ["r_success"], "'lab'", {"reward": (0, 100)})
    assert wide.violations({"reward": 2.0, "r_success": 0.0}) == ["reward = 2.0 is outside [0, 1]"]
    assert wide.violations({"reward": float("nan"), "r_success": 0.5, "points": 3}) == [
        "reward = nan is not a finite float",
        "r_success = 0.5 is not 0 or 1",
        "key 'points' = 3 is no metric name (reward or r_*)",
    ]
    assert MetricContract.of("reward", ["r_x"], "'lab'").undeclared(Points()) == [
        "reward",
        "r_success",
        "r_x",
    ]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def server_up_after(world: Path, delay_s: float) -> Iterator[str]:
    """The URL of an environment server that starts listening ``delay_s`` from now."""
    port = free_port()
    started: list[Any] = []
    weights = world / "checkpoints" / "base" / "model.safetensors"

    def start() -> None:
        time.sleep(delay_s)
        started.append(
            start_servers(
                str(weights), str(world), 20260830, env_port=port, server_args=AS_LAUNCHED
            )
        )

    thread = threading.Thread(target=start, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        thread.join()
        for servers in started:
            servers.shutdown()


def test_a_lab_server_not_yet_up_is_waited_out_and_the_run_completes(
    small_world: Path, tmp_path: Path
) -> None:
    delay_s = 4.0
    began = time.monotonic()
    with server_up_after(small_world, delay_s) as url:
        summary = evaluate(lab_inputs(small_world, url, outage_budget_s=60.0), tmp_path)
    assert time.monotonic() - began >= delay_s
    assert summary["coverage"] == 1.0
    waited = json.loads((tmp_path / "s").read_text())["provenance"]["execution"]["retries"]
    assert waited.get("environment/adapter", 0) >= 1, waited


def test_a_lab_server_that_never_comes_is_one_line_after_the_budget(
    small_world: Path, tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(SkillevalError) as stopped:
        evaluate(lab_inputs(small_world, url, outage_budget_s=1.0), tmp_path)
    said = str(stopped.value)
    assert f"environment server {url}" in said and "outage budget of 1 s" in said, said
    assert "InfrastructureError" not in said.split("(its adapter")[0]


class UnitShop(JsonHandler):
    """A lab's unit-conversion environment on the lab_env wire (its own tool, graded per
    task): ``mode`` plants one fault. ``points``: it grades on a 0-100 scale that the
    adapter passes on; ``new_problem``: each start of a task draws a new problem;
    ``bad_tools``: it lists its tool by name only."""

    mode = ""
    starts: ClassVar = itertools.count()
    TOOL: ClassVar = {
        "type": "function",
        "function": {
            "name": "convert",
            "parameters": {
                "type": "object",
                "properties": {
                    "value": {"type": "number"},
                    "unit": {"type": "string", "enum": ["m", "ft"]},
                },
                "required": ["value", "unit"],
            },
        },
    }

    def do_GET(self) -> None:
        if self.path == "/info":
            self.reply(200, {"tools": ["convert"] if self.mode == "bad_tools" else [self.TOOL]})
            return
        task = self.path.split("/")[2].split("@")[0]
        share = (sum(map(ord, task)) % 4) / 4  # each task its own grade
        scale = 100.0 if self.mode == "points" else 1.0
        grades = {f"r_{m}": share * scale for m in ("strict", "category", "budget", "attrs")}
        self.reply(200, {"reward": share * scale, "r_success": 0.0, **grades})

    def do_POST(self) -> None:
        request = self.body()
        if self.path == "/episodes":
            task = request["task_id"]
            drawn = next(self.starts) if self.mode == "new_problem" else 0
            instruction = f"Convert {10 + drawn} m to ft for {task}."
            self.reply(
                200, {"episode_id": f"{task}@{next(self.starts)}", "instruction": instruction}
            )
        elif request.get("name") != "convert" or not isinstance(
            request["arguments"].get("value"), int | float
        ):
            self.reply(200, {"observation": "unusable call", "done": False})
        else:
            self.reply(
                200,
                {"observation": f"{request['arguments']['value'] * 3.28084:.2f}", "done": False},
            )

    def do_DELETE(self) -> None:
        self.reply(200, {})


@contextmanager
def unit_shop(mode: str, port: int = 0, after_s: float = 0.0) -> Iterator[str]:
    """The URL of a UnitShop with ``mode`` planted, listening ``after_s`` from now (``port``
    must then be a free port to take)."""
    handler = type("Planted", (UnitShop,), {"mode": mode})
    servers: list[KillableServer] = []

    def listen_and_serve() -> None:
        time.sleep(after_s)
        servers.append(KillableServer(("127.0.0.1", port), handler))
        servers[0].serve_forever()

    if after_s:
        threading.Thread(target=listen_and_serve, daemon=True).start()
    else:  # listening before the URL is handed out
        servers.append(KillableServer(("127.0.0.1", port), handler))
        port = servers[0].server_address[1]
        threading.Thread(target=servers[0].serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        while not servers:
            time.sleep(0.05)
        servers[0].shutdown()
        servers[0].server_close()


class LeakyEpisode(lab_env.adapter.LabShopEpisode):
    def rewards(self) -> dict[str, float]:
        """The grade of the episode opened last, not this one's: the bug under test."""
        opened = self.shop.last_opened  # type: ignore[attr-defined]
        return lab_env.scoring.rewards_of(self.shop.call("GET", f"/episodes/{opened}/rewards"))


class LeakyShop(lab_env.adapter.LabShop):
    def start(self, task_id: str) -> lab_env.adapter.LabShopEpisode:
        episode = super().start(task_id)
        self.last_opened = episode.episode_id
        return LeakyEpisode(self, episode.episode_id, episode.instruction)


def rules_broken(small_world: Path, mode: str) -> dict[int, list[str]]:
    with unit_shop(mode) as url:
        checked = env_check(world_config(small_world, url, "lab-shop"))
    found: dict[int, list[str]] = {}
    for violation in checked.violations:
        found.setdefault(violation.rule, []).append(str(violation))
    report = checked.report()
    assert all(f"fix of rule {rule}: " in report for rule in found), report
    return found


def test_env_check_passes_the_unit_shop_as_it_should_be(small_world: Path) -> None:
    assert rules_broken(small_world, "") == {}


def test_env_check_reports_a_points_scale_as_rule_4(small_world: Path) -> None:
    found = rules_broken(small_world, "points")
    assert set(found) == {4}, found
    assert any(re.search(r"reward = (25|50|75)\.0 is outside \[0, 1\]", v) for v in found[4])


def test_env_check_reports_a_new_problem_per_start_as_rule_6(small_world: Path) -> None:
    found = rules_broken(small_world, "new_problem")
    assert set(found) == {6}, found
    assert "started twice and stepped alike presents another instruction" in found[6][0]


def test_env_check_reports_rewards_read_from_another_episode_as_rule_5() -> None:
    with unit_shop("") as url:
        adapter = LeakyShop({"url": url, "slots": 4})
        found = contract_violations(adapter, ["task-a", "task-b", "task-c"])
        honest = contract_violations(
            lab_env.adapter.LabShop({"url": url, "slots": 4}), ["task-a", "task-b", "task-c"]
        )
    assert [v.rule for v in found] == [5], found
    assert "task task-a: rewards" in str(found[0]) and "reads another episode's state" in str(
        found[0]
    )
    assert honest == []


def test_env_check_reads_the_config_as_the_workflow_does(tmp_path: Path) -> None:
    """An overlay that changes a frozen protocol is refused by env check's reading of the
    config, as the workflow refuses it when parsed."""
    overlay = tmp_path / "lab.yaml"
    overlay.write_text("protocols: {local-sglang: {environment: {slots: 64}}}\n")
    with pytest.raises(
        ConfigError, match=r"protocol local-sglang is frozen; .* environment\.slots"
    ):
        snakemake_config(REPO, [str(overlay)], None)


def test_env_check_waits_for_a_lab_server_not_yet_up(small_world: Path) -> None:
    """``--wait`` works for a lab's adapter as for the built-in one."""
    with server_up_after(small_world, 2.0) as url:
        checked = env_check(world_config(small_world, url, "lab-shop"), wait_s=30)
    assert checked.violations == [], checked.report()


@pytest.mark.parametrize("order", ["breach first", "breach last"])
def test_a_breach_keeps_the_episodes_that_finished_beside_it(tmp_path: Path, order: str) -> None:
    """Two episodes end at once, one breaking the contract: the other is journaled before
    the run stops, whichever the scheduler sees first (nothing computed is lost)."""
    finished: Future[EpisodeResult] = Future()
    rewards = {"reward": 1.0, "r_success": 1.0}
    finished.set_result(EpisodeResult("t1", 0, rewards, 1, 5, 5, "done", None))
    breached: Future[EpisodeResult] = Future()
    breached.set_exception(ContractBreach("reward = 2.0 is outside [0, 1]"))
    keys = {finished: ("t1", 0), breached: ("t2", 0)}
    done = [breached, finished] if order == "breach first" else [finished, breached]
    schedule = _Schedule(list(keys.values()), RetryPolicy(), RunStats(total=2))
    schedule.in_flight = {future: keys[future] for future in done}
    with Journal(tmp_path, "run", "fp", {}) as journal:
        with pytest.raises(ContractBreach):
            schedule.collect(done, journal)
        assert set(journal.records) == {("t1", 0)}


def test_a_lab_server_that_comes_up_broken_is_refused_before_the_first_episode(
    small_world: Path, tmp_path: Path
) -> None:
    """Not up when the run starts, its contract could not be checked then: it is checked
    once the server answers, before any episode."""
    late = unit_shop("bad_tools", free_port(), after_s=2.0)
    with late as url, pytest.raises(SkillevalError) as refused:
        evaluate(lab_inputs(small_world, url, outage_budget_s=60.0), tmp_path)
    said = str(refused.value)
    assert "breaks the contract" in said and "tool 0 is not" in said, said
    journals = list((tmp_path / "j").rglob("*.jsonl"))
    assert all(path.stat().st_size == 0 for path in journals), "an episode ran"
    assert not (tmp_path / "s").exists()
