"""Throughput of the real path (OpenAI client + HTTP environment) at concurrency 32.

Serves the default world on loopback with a fixed latency added to every model reply,
runs the 400 test tasks through evaluate(), and compares with the ideal: every one of
the 32 workers always waiting on a reply, i.e. 32 / latency requests per second (and
32 / (latency x mean steps) tasks per second). Target (issue 5): >= 90% of ideal.
Prints figures; asserts nothing. Usage: python benchmarks/bench_http_throughput.py [latency_s]
"""

from __future__ import annotations

import copy
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
from skilleval.world.generate import write_checkpoint, write_tasks

SEED = 20260901


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main(latency: float) -> None:
    import yaml

    root = Path(tempfile.mkdtemp(prefix="bench-http-"))
    write_tasks(
        SEED, 8, 60, {"test": 400}, root / "catalogue.json", root / "persona_splits.v1.json"
    )
    weights = root / "checkpoints" / "base" / "model.safetensors"
    write_checkpoint(SEED, "base", weights)
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
        ],
        stdout=subprocess.DEVNULL,
    )
    wait_healthy(f"http://127.0.0.1:{model_port}/v1", 60, lambda: server.poll() is None)
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
    start = time.perf_counter()
    summary = evaluate(inputs, str(root / "r.jsonl"), str(root / "s.json"), str(root / "journal"))
    elapsed = time.perf_counter() - start
    server.terminate()
    server.wait()
    requests = summary["steps_mean"] * summary["n_records"]
    concurrency = protocol["runtime"]["concurrency"]
    ideal_rps = concurrency / latency
    print(
        f"latency {latency * 1000:.0f} ms per reply, concurrency {concurrency}, "
        f"{summary['n_records']} tasks, {requests:.0f} model requests in {elapsed:.1f} s"
    )
    print(
        f"  requests/s {requests / elapsed:.1f} vs ideal {ideal_rps:.1f} "
        f"({100 * requests / elapsed / ideal_rps:.0f}% of ideal; target >= 90%)"
    )
    ideal_tps = concurrency / (latency * summary["steps_mean"])
    print(f"  tasks/s {summary['n_records'] / elapsed:.2f} vs ideal {ideal_tps:.2f}")


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 0.2)
