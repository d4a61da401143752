"""The serving engines a run may talk to, and how each spells the protocol's sampling.

The protocol says "no top_k"; each engine reads another value as "disabled", and each
fills the sampling parameters a request leaves out from its own defaults. A request must
therefore be written in the dialect of the engine that answers it: the engine is
identified from what the server reports (``identify``), or declared in the protocol
(``model_server.engine``) for a server that reports nothing; an unknown engine with a
value that needs a dialect is a refusal, never a guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from skilleval.errors import ServiceError


@dataclass(frozen=True)
class Engine:
    name: str
    # What the engine reads as "no top_k"; None: the field is left out (the engine has no
    # top_k, so it applies no default).
    top_k_disabled: int | None
    # Sampling the protocol does not name, sent as the values that turn it off, in the
    # engine's own spelling: an engine fills an omitted field from its defaults.
    neutral: Mapping[str, float] = field(default_factory=dict)
    # Where the values above come from.
    source: str = ""

    def describe(self) -> dict[str, Any]:
        return {
            "engine": self.name,
            "top_k_disabled": self.top_k_disabled,
            "neutral": dict(self.neutral),
        }


ENGINES = {
    engine.name: engine
    for engine in (
        Engine(
            "sglang",
            -1,
            {"min_p": 0.0, "repetition_penalty": 1.0},
            "sglang/srt/sampling/sampling_params.py: top_k -1 disables; defaults from the "
            "checkpoint's generation_config.json unless --sampling-defaults openai",
        ),
        Engine(
            "vllm",
            -1,
            {"min_p": 0.0, "repetition_penalty": 1.0},
            "vllm/sampling_params.py: top_k 0 or -1 considers all tokens",
        ),
        Engine(
            "llama-cpp-python",
            0,
            {"min_p": 0.0, "repeat_penalty": 1.0},
            "llama_cpp/server/types.py: top_k default 40, ge=0 (0 disables in llama.cpp's "
            "sampler); min_p default 0.05; repeat_penalty default 1.1",
        ),
        Engine(
            "llama.cpp",
            0,
            {"min_p": 0.0, "repeat_penalty": 1.0},
            "llama.cpp tools/server/README.md: top_k default 40, 0 = disabled; min_p default 0.05",
        ),
        Engine(
            "openai",
            None,
            {},
            "the OpenAI chat completions API has no top_k, min_p or repetition penalty",
        ),
    )
}

# What each engine puts in /v1/models' owned_by (sglang/srt/entrypoints/openai/protocol.py
# ModelCard, vllm/entrypoints/openai/protocol.py ModelCard, llama.cpp tools/server
# server.cpp, llama_cpp/server/app.py get_models, the OpenAI API's "openai"/"system").
OWNED_BY = {"sglang": "sglang", "vllm": "vllm", "llamacpp": "llama.cpp", "me": None}
# The title FastAPI gives llama-cpp-python's server (llama_cpp/server/app.py create_app),
# read from /openapi.json with its version.
LLAMA_CPP_PYTHON_TITLE = "llama.cpp Python API"


Identified = tuple[str | None, str | None, str]  # (engine, version, how it was told)


def identify(identity: Mapping[str, Any]) -> Identified:
    """(engine name, its version, how it was told) from what a server reported
    (serving.service.fetch_identity); (None, None, why) when nothing identifies it."""
    if identity.get("identity_endpoints"):
        version = (identity.get("server") or {}).get("version")
        return "sglang", version, "it answers sglang's identity endpoints"
    openapi = identity.get("openapi") or {}
    if LLAMA_CPP_PYTHON_TITLE in str(openapi.get("title") or ""):
        return "llama-cpp-python", openapi.get("version"), f"/openapi.json: {openapi['title']}"
    owners = {str(o) for o in identity.get("owned_by") or []}
    for owner in sorted(owners):
        name = OWNED_BY.get(owner)
        if name is not None:
            # llama-server reports its build at /props (tools/server/server.cpp build_info)
            version = (identity.get("props") or {}).get("build_info")
            return name, version, f"/v1/models: owned_by {owner!r}"
    return None, None, "the server names no engine this package knows"


def engine_of(declared: str | None, identified: Identified, base_url: str) -> Engine:
    """The engine a run's requests are written for: the identified one, or the one the
    protocol declares for a server that says nothing; a declaration the server contradicts
    is refused."""
    found, _, how = identified
    if declared is not None and found is not None and declared != found:
        raise ServiceError(
            f"model server {base_url} is {found} ({how}), but the protocol declares "
            f"model_server.engine: {declared}; fix: set it to {found} (or null to identify it)"
        )
    name = declared or found
    if name is None:
        raise ServiceError(
            f"model server {base_url}: which engine serves it is unknown ({how}), so how to "
            'send the protocol\'s sampling ("no top_k", the neutral min_p and repetition '
            f"penalty) in its dialect is unknown; fix: set model_server.engine to one of "
            f"{', '.join(sorted(ENGINES))}"
        )
    return ENGINES[name]
