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

Also prints the client's and the servers' CPU milliseconds per model request. Asserts
nothing. Usage: python benchmarks/bench_http_throughput.py [latency_s]
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
from dataclasses import replace
from pathlib import Path

from skilleval.config.plan import WorkflowPlan
from skilleval.runs.evaluation import evaluate
from skilleval.serving.launcher import wait_healthy
from skilleval.world.design import checkpoint_design
from skilleval.world.generate import write_checkpoint, write_tasks

SEED = 20260901


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

    root = Path(tempfile.mkdtemp(prefix="bench-http-"))
    write_tasks(
        SEED, 8, 60, {"test": 400}, root / "catalogue.json", root / "persona_splits.v1.json"
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
    wait_healthy(f"http://127.0.0.1:{model_port}/v1", "bench", 60, lambda: server.poll() is None)
    model_url, env_url = f"http://127.0.0.1:{model_port}/v1", f"http://127.0.0.1:{env_port}"
    config = yaml.safe_load(Path("config/config.yaml").read_text())
    plan = WorkflowPlan(config)
    inputs = plan.run_inputs(plan.runs["base-free"])
    protocol = copy.deepcopy(inputs.protocol)
    protocol["model_server"]["base_url"] = model_url
    protocol["environment"]["url"] = env_url
    protocol["tasks"]["split_file"] = str(root / "persona_splits.v1.json")
    inputs = replace(
        inputs,
        protocol=protocol,
        checkpoint_path=str(weights),
        split_file=str(root / "persona_splits.v1.json"),
        catalogue=str(root / "catalogue.json"),
        backends={"policy": "openai", "environment": "http", "model_server": "external"},
    )
    start, cpu_start = time.perf_counter(), time.process_time()
    summary = evaluate(inputs, str(root / "r.jsonl"), str(root / "s.json"), str(root / "journal"))
    elapsed, client_cpu = time.perf_counter() - start, time.process_time() - cpu_start
    server_cpu = process_cpu_s(server.pid)
    server.terminate()
    server.wait()
    steps = [json.loads(line)["steps"] for line in (root / "r.jsonl").open()]
    requests = sum(steps)
    concurrency = protocol["runtime"]["concurrency"]
    bound = max(requests * latency / concurrency, max(steps) * latency)
    floor = schedule_floor(steps, latency, concurrency)
    print(
        f"latency {latency * 1000:.0f} ms per reply, concurrency {concurrency}, "
        f"{len(steps)} tasks, {requests} model requests in {elapsed:.2f} s"
    )
    print(f"  bound {bound:.2f} s: {100 * bound / elapsed:.1f}% of it reached (target >= 95%)")
    print(
        f"  schedule floor for this task order {floor:.2f} s: {100 * floor / elapsed:.1f}% "
        "of it reached"
    )
    print(
        f"  CPU per model request: client {1000 * client_cpu / requests:.1f} ms, "
        f"servers {1000 * server_cpu / requests:.1f} ms; retries "
        f"{summary['provenance']['execution']['retries'] or 'none'}"
    )


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 0.2)
