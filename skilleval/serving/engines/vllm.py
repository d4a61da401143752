"""vLLM: its sampling dialect and how it is told. A run does not launch it (serve it
yourself, model_server: external); it serves the weights' directory it names as each
model's ``root`` in /v1/models (vllm/entrypoints/openai/serving_models.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skilleval.serving.engines.base import Engine, Identified


def identify(identity: Mapping[str, Any]) -> Identified | None:
    """vLLM's /v1/models cards say ``owned_by: vllm`` (vllm/entrypoints/openai/protocol.py
    ModelCard)."""
    if "vllm" in (identity.get("owned_by") or []):
        return "vllm", None, "/v1/models: owned_by 'vllm'"
    return None


ENGINE = Engine(
    "vllm",
    -1,
    {"min_p": 0.0, "repetition_penalty": 1.0},
    "vllm/sampling_params.py: top_k 0 or -1 considers all tokens",
    identify,
)
