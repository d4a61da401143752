"""What the stand-in model server says it is, in sglang 0.5.23's own shapes: its identity
endpoints, the launch line it records, and which requests its --api-key lets through."""

from __future__ import annotations

import secrets
import shlex
from typing import Any

from skilleval.serving.engines.sglang import model_flags


def key_allows(api_key: str | None, method: str, path: str, authorization: str | None) -> bool:
    """sglang's --api-key: every request but OPTIONS and health, readiness and metrics
    needs the bearer token, its scheme in any case (sglang/srt/utils/auth.py,
    decide_request_auth, at its normal level)."""
    if not api_key or method == "OPTIONS" or path.startswith(("/health", "/ready", "/metrics")):
        return True
    scheme, _, token = (authorization or "").partition(" ")
    return scheme.lower() == "bearer" and secrets.compare_digest(token, api_key)


def identity_replies(identity: dict[str, Any], endpoints: str) -> dict[str, dict[str, Any]]:
    """sglang's identity endpoints for the served model, in the shapes sglang 0.5.23 replies
    with (``current``) or the shapes of the deprecated pair on older servers."""
    parsers = {k: identity[k] for k in ("tool_call_parser", "reasoning_parser")}
    server_info = {
        "model_path": identity["model_path"],
        "served_model_name": identity["served_model_name"],
        "tp_size": identity["tp_size"],
        "dp_size": identity["dp_size"],
        **parsers,
        "sampling_defaults": identity["sampling_defaults"],
        "preferred_sampling_params": None,
        "version": identity["version"],
    }
    if endpoints == "deprecated":
        model_info = {"model_path": identity["model_path"], "is_generation": True}
        return {"/get_model_info": model_info, "/get_server_info": server_info}
    model_info = {
        "model_path": identity["model_path"],
        "served_model_name": identity["served_model_name"],
        "tokenizer_path": identity["model_path"],
        "is_generation": True,
        "weight_version": "default",
        "preferred_sampling_params": None,
        **parsers,
        "model_type": "shopsim",
        "architectures": ["ShopSimPolicy"],
    }
    launched = {**server_info, "launch_command": identity["launch_command"]}
    return {"/model_info": model_info, "/server_info": launched}


def launch_command(identity: dict[str, Any]) -> str:
    """The serve-world command line that serves this identity (sglang records its own)."""
    flags = model_flags(
        identity["model_path"],
        identity["tp_size"],
        identity["dp_size"],
        identity["tool_call_parser"],
        identity["reasoning_parser"],
    )
    return shlex.join(["skilleval", "serve-world", *flags])
