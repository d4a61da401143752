"""vLLM: its sampling dialect, how it is told, and how a run's job launches it.

It serves the weights' directory it names as each model's ``root`` in /v1/models
(vllm/entrypoints/openai/serving_models.py). Its launch options are those of ``vllm
serve`` in vLLM 0.34 (vllm/entrypoints/common/cli_args.py make_arg_parser: FrontendArgs
and EngineArgs, vllm/engine/arg_utils.py); tests/test_engines.py checks every flag below
against that parser as the wheel declares it. /health answers 200 once it serves
(vllm/entrypoints/serve/instrumentator/health.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skilleval.protocol.sections import Served
from skilleval.serving.engines.base import Engine, Identified, Launch, needs_architectures
from skilleval.serving.engines.sglang import served_path


def identify(identity: Mapping[str, Any]) -> Identified | None:
    """vLLM's /v1/models cards say ``owned_by: vllm`` (vllm/entrypoints/openai/protocol.py
    ModelCard)."""
    if "vllm" in (identity.get("owned_by") or []):
        return "vllm", None, "/v1/models: owned_by 'vllm'"
    return None


def arguments(weights: str, server: Served, port: int, name: str) -> list[str]:
    """The arguments after ``vllm serve``: the model's directory, the name requests use,
    the protocol's parallelism and parsers (a value it leaves null is vLLM's default)."""
    given = {
        "--tensor-parallel-size": server.tp,
        "--data-parallel-size": server.dp_size,
        "--reasoning-parser": server.reasoning_parser,
    }
    flags = ["--model", served_path(weights), "--served-model-name", name]
    for flag, value in given.items():
        if value is not None:
            flags += [flag, str(value)]
    if server.tool_call_parser is not None:
        # vLLM parses tool calls only with auto tool choice on (cli_args.py validate).
        flags += ["--enable-auto-tool-choice", "--tool-call-parser", server.tool_call_parser]
    return [
        *flags,
        # A parameter a request leaves out must not come from the checkpoint's
        # generation_config.json (vLLM's default, --generation-config auto).
        "--generation-config",
        "vllm",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]


ENGINE = Engine(
    "vllm",
    -1,
    {"min_p": 0.0, "repetition_penalty": 1.0},
    "vllm/sampling_params.py: top_k 0 or -1 considers all tokens",
    identify,
    Launch(arguments, "/health", needs_architectures("vllm"), "vllm", served_path),
)
