"""The ``skilleval serve-world`` command: the default world over HTTP with sglang's flags.

Kept beside the servers so the command line stays a thin list of commands.
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import signal
import sys
import threading
import time
from typing import Any

from skilleval import paths


def serve_world(args: argparse.Namespace) -> int:
    """Serve the default world over HTTP until interrupted (sglang-compatible flags)."""
    from skilleval.checkpoints.layout import resolve_weights
    from skilleval.world.server import Faults, start_servers

    faults = Faults(
        rate=args.fault_rate, kinds=tuple(args.fault_kinds.split(",")), latency_s=args.latency
    )
    time.sleep(args.startup_delay)
    servers = start_servers(
        str(resolve_weights(args.model_path)),
        args.world_dir,
        args.seed,
        args.port,
        args.env_port,
        args.slots,
        faults,
        {
            "tp_size": args.tp_size,
            "dp_size": args.dp_size,
            "tool_call_parser": args.tool_call_parser,
            "reasoning_parser": args.reasoning_parser,
            "served_model_name": args.served_model_name,
            "sampling_defaults": args.sampling_defaults,
            "api_key": args.api_key,
            "launch_command": shlex.join(["skilleval", *sys.argv[1:]]),
        },
        args.identity_endpoints,
        Faults(rate=args.env_fault_rate, kinds=("drop_step",)),
    )
    print(f"model server {servers.model_url}, environment server {servers.env_url}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with contextlib.suppress(KeyboardInterrupt):
        stop.wait()
    servers.shutdown()
    return 0


def add_serve_world(sub: Any) -> None:
    serve = sub.add_parser("serve-world", help="serve the sim policy and shopsim over HTTP")
    serve.add_argument("--model-path", required=True, help="checkpoint dir or model.safetensors")
    serve.add_argument("--world-dir", default=paths.DEFAULT_WORLD_DIR, help="world.dir of config")
    serve.add_argument("--port", type=int, default=30000, help="model server port")
    serve.add_argument("--env-port", type=int, default=5700, help="environment server port")
    serve.add_argument("--host", default="127.0.0.1", help="loopback only; kept for sglang parity")
    serve.add_argument("--seed", type=int, default=20260830, help="the protocol's runtime seed")
    serve.add_argument("--slots", type=int, default=48, help="episode slots of the environment")
    serve.add_argument(
        "--tp-size", "--tensor-parallel-size", type=int, default=1, help="reported tp"
    )
    serve.add_argument("--dp-size", type=int, default=4, help="reported dp")
    serve.add_argument(
        "--tool-call-parser", default="qwen3_coder", help="parser reported by /model_info"
    )
    serve.add_argument(
        "--reasoning-parser", default="qwen3", help="reasoning parser reported by /model_info"
    )
    serve.add_argument(
        "--served-model-name",
        help="the model name /v1/models lists (sglang's flag; default: the model path)",
    )
    serve.add_argument(
        "--sampling-defaults",
        choices=["openai", "model"],
        default="model",
        help="where a request's missing sampling parameters come from, as in sglang: the "
        "checkpoint's generation_config.json (model, sglang's default) or OpenAI's defaults",
    )
    serve.add_argument("--api-key", help="bearer token all but /health needs (sglang's flag)")
    serve.add_argument(
        "--identity-endpoints",
        choices=["current", "deprecated"],
        default="current",
        help="serve sglang's /model_info and /server_info (default) or the deprecated "
        "/get_model_info and /get_server_info, to test clients against older servers",
    )
    serve.add_argument(
        "--fault-rate", type=float, default=0.0, help="share of model replies faulted"
    )
    serve.add_argument(
        "--fault-kinds",
        default="429,503,slow",
        help="model faults drawn from: 429, 503, slow, malformed, context_overflow ",
    )
    serve.add_argument(
        "--env-fault-rate",
        type=float,
        default=0.0,
        help="share of environment steps applied whose reply is then dropped",
    )
    serve.add_argument("--latency", type=float, default=0.0, help="seconds added to each reply")
    serve.add_argument(
        "--startup-delay",
        type=float,
        default=0.0,
        help="seconds before the servers listen (an sglang start-up stand-in, for benchmarks)",
    )
    serve.set_defaults(func=serve_world)
