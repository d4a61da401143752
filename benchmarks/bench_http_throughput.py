"""Throughput of the real path (OpenAI client + HTTP environment) at concurrency 32.

Serves the default world on loopback (model and environment servers in a process of
their own) with a fixed latency added to every model reply, runs the 400 test tasks
through evaluate(), and compares the wall time with two floors:

* the bound of issue 14: max(total model requests x latency / 32, longest episode's
  chain of requests x latency), which no client can beat whatever the task order;
* the schedule floor: the makespan of a client with zero overhead that starts the tasks
  in the run's order (each episode's length taken from the run's own records). The gap
  between the two is the tail of the task order (long episodes started late), not the
  client's cost.

Also prints how long the run took before its first episode started (importing the client,
the server identity check: a fixed cost per run, which the floor does not model) and the
episodes' share of the floor without it, and the client's and the servers' CPU
milliseconds per model request. Asserts nothing. Runs the tasks twice: in the listed order
(no earlier run), then as a later run whose tasks' lengths the first run's journal holds
(longest expected first, issue 27).
Usage: python benchmarks/bench_http_throughput.py [latency_s]
SKILLEVAL_BENCH_SIZE=tiny: 40 tasks, 10 ms a reply.
"""

from __future__ import annotations

import copy
import heapq
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from skilleval.config.model import Config
from skilleval.protocol.sections import Protocol
from skilleval.runs.evaluation import evaluate
from skilleval.serving.launcher import wait_healthy
from skilleval.workflow.plan import WorkflowPlan
from skilleval.world.design import checkpoint_design
from skilleval.world.generate import write_checkpoint, write_tasks

SEED = 20260901
TINY = os.environ.get("SKILLEVAL_BENCH_SIZE") == "tiny"
TASKS = 40 if TINY else 400


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def schedule_floor(steps: list[int], latency: float, concurrency: int) -> float:
    """Makespan of a zero-overhead client starting tasks in order on `concurrency` workers."""
    free_at = [0.0] * concurrency
    for n in steps:
        heapq.heappush(free_at, heapq.heappop(free_at) + n * latency)
    return max(free_at)


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a running process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(latency: float) -> None:
    import yaml

    with tempfile.TemporaryDirectory(prefix="bench-http-") as folder:
        root = Path(folder)
        write_tasks(
            SEED, 8, 60, {"test": TASKS}, root / "catalogue.json", root / "persona_splits.v1.json"
        )
        weights = root / "checkpoints" / "base" / "model.safetensors"
        write_checkpoint(SEED, "base", weights, checkpoint_design(0, 2))
        # The servers run in their own process, as a real server would: sharing the client's
        # interpreter would make both fight over one GIL.
        model_port, env_port = free_port(), free_port()
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "skilleval.cli",
                "serve-world",
                "--model-path",
                str(weights.parent),
                "--world-dir",
                str(root),
                "--port",
                str(model_port),
                "--env-port",
                str(env_port),
                "--latency",
                str(latency),
                "--served-model-name",
                "bench",
                "--sampling-defaults",
                "openai",
            ],
            stdout=subprocess.DEVNULL,
        )
        try:
            wait_healthy(
                f"http://127.0.0.1:{model_port}/v1", "bench", 60, lambda: server.poll() is None, {}
            )
            model_url, env_url = f"http://127.0.0.1:{model_port}/v1", f"http://127.0.0.1:{env_port}"
            config = yaml.safe_load(Path("config/config.yaml").read_text())
            plan = WorkflowPlan(Config.model_validate(config))
            inputs = plan.run_inputs(plan.runs["base-free"])
            protocol = copy.deepcopy(inputs.protocol.settings())
            protocol["execution"]["model_server"]["base_url"] = model_url
            protocol["execution"]["environment"]["url"] = env_url
            protocol["tasks"]["split_file"] = str(root / "persona_splits.v1.json")
            inputs = replace(
                inputs,
                protocol=Protocol.model_validate(protocol),
                checkpoint_path=str(weights),
                split_file=str(root / "persona_splits.v1.json"),
                catalogue=str(root / "catalogue.json"),
                backends={"policy": "openai", "environment": "http", "model_server": "external"},
            )
            concurrency = inputs.protocol.runtime.concurrency
            first = timed_run(inputs, root, "listed", server.pid)
            # The same tasks again, as a later run: the first run's journal holds their lengths.
            second = timed_run(
                replace(inputs, run=f"{inputs.run}-again"), root, "again", server.pid
            )
        finally:
            server.terminate()
            server.wait()
    for label, run in (
        ("without earlier lengths (listed order)", first),
        ("with the first run's lengths (longest expected first)", second),
    ):
        steps = [r["steps"] for r in run.records]
        by_task = {r["task_id"]: r["steps"] for r in run.records}
        requests = sum(steps)
        bound = max(requests * latency / concurrency, max(steps) * latency)
        floor = schedule_floor([by_task[task] for task in run.order], latency, concurrency)
        print(
            f"{label}: latency {latency * 1000:.0f} ms per reply, concurrency {concurrency}, "
            f"{len(steps)} tasks, {requests} model requests in {run.elapsed:.2f} s"
        )
        print(f"  bound {bound:.2f} s: {100 * bound / run.elapsed:.1f}% of it reached")
        print(
            f"  schedule floor for this task order {floor:.2f} s: "
            f"{100 * floor / run.elapsed:.1f}% of it reached"
        )
        # The floor models the episodes only; a run's start-up is a fixed cost per run.
        episodes = run.elapsed - run.startup
        print(
            f"  of which {run.startup:.2f} s before the first episode; the episodes alone, "
            f"{episodes:.2f} s: {100 * floor / episodes:.1f}% of the floor"
        )
        print(
            f"  CPU per model request: client {1000 * run.client_cpu / requests:.1f} ms, "
            f"servers {1000 * run.server_cpu / requests:.1f} ms"
        )
    same = [r | {"run": None} for r in first.records] == [r | {"run": None} for r in second.records]
    print(f"results identical task by task: {same}")


@dataclass
class TimedRun:
    """One evaluate() call: wall s, the part before its first episode starts (client
    import, identity check, journal), client and server CPU s, records, start order."""

    elapsed: float
    startup: float
    client_cpu: float
    server_cpu: float
    records: list[dict[str, Any]]
    order: list[str]


def timed_run(inputs: Any, root: Path, label: str, server_pid: int) -> TimedRun:
    import skilleval.runs.evaluation as evaluation

    order: list[str] = []
    episodes_from: list[float] = []
    run_episodes = evaluation.run_episodes

    def recording(keys: Any, *args: Any, **kwargs: Any) -> Any:
        episodes_from.append(time.perf_counter())
        keys = list(keys)
        order.extend(task for task, _ in keys)
        return run_episodes(keys, *args, **kwargs)

    evaluation.run_episodes = recording  # type: ignore[assignment]
    server_before = process_cpu_s(server_pid)
    start, cpu_start = time.perf_counter(), time.process_time()
    try:
        evaluate(inputs, str(root / f"{label}.jsonl"), str(root / f"{label}.json"),
                 str(root / "journal"))  # fmt: skip
    finally:
        evaluation.run_episodes = run_episodes  # type: ignore[assignment]
    elapsed, client_cpu = time.perf_counter() - start, time.process_time() - cpu_start
    records = [json.loads(line) for line in (root / f"{label}.jsonl").open()]
    server_cpu = process_cpu_s(server_pid) - server_before
    return TimedRun(elapsed, episodes_from[0] - start, client_cpu, server_cpu, records, order)


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else (0.01 if TINY else 0.2))
