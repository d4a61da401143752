"""llama.cpp's own server, llama-server: its sampling dialect and how it is told. A run
does not launch it (serve it yourself, model_server: external)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skilleval.serving.engines.base import Engine, Identified


def identify(identity: Mapping[str, Any]) -> Identified | None:
    """llama-server's /v1/models cards say ``owned_by: llamacpp``; its build is /props
    ``build_info`` (tools/server/server.cpp)."""
    if "llamacpp" in (identity.get("owned_by") or []):
        version = (identity.get("props") or {}).get("build_info")
        return "llama.cpp", version, "/v1/models: owned_by 'llamacpp'"
    return None


ENGINE = Engine(
    "llama.cpp",
    0,
    {"min_p": 0.0, "repeat_penalty": 1.0},
    "llama.cpp tools/server/README.md: top_k default 40, 0 = disabled; min_p default 0.05",
    identify,
)
