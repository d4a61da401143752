"""llama-cpp-python's OpenAI-compatible server (``python -m llama_cpp.server``): its
sampling dialect, how it is told, and how a run's job launches it on a GGUF checkpoint.

Its options are read from llama_cpp/server/settings.py (0.3.36): ``--model`` (the GGUF
file), ``--model_alias`` (the name /v1/models lists and requests use), ``--host`` and
``--port``. A protocol's launch command may add more of them (``--n_ctx``,
``--chat_format``: the chat template decides whether the tools reach the model). It has
no health endpoint: it serves once /v1/models answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skilleval.errors import ServiceError
from skilleval.protocol.sections import ModelServer
from skilleval.serving.engines.base import Engine, Identified, Launch

# The title FastAPI gives llama-cpp-python's server (llama_cpp/server/app.py create_app),
# read from /openapi.json with its version.
TITLE = "llama.cpp Python API"


def identify(identity: Mapping[str, Any]) -> Identified | None:
    openapi = identity.get("openapi") or {}
    if TITLE in str(openapi.get("title") or ""):
        return "llama-cpp-python", openapi.get("version"), f"/openapi.json: {openapi['title']}"
    return None


def arguments(weights: str, server: ModelServer, port: int, name: str) -> list[str]:
    return [
        "--model",
        str(Path(weights).absolute()),
        "--model_alias",
        name,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]


def check_servable(weights: str) -> None:
    """llama-cpp-python loads one GGUF file (llama_cpp/llama.py, Llama(model_path))."""
    if Path(weights).suffix != ".gguf" or not Path(weights).is_file():
        raise ServiceError(
            f"llama-cpp-python serves one GGUF file, and the run's checkpoint is {weights}; "
            "fix: register the model's .gguf file as the checkpoint's path, or serve it "
            "with another engine"
        )


ENGINE = Engine(
    "llama-cpp-python",
    0,
    {"min_p": 0.0, "repeat_penalty": 1.0},
    "llama_cpp/server/types.py: top_k default 40, ge=0 (0 disables in llama.cpp's "
    "sampler); min_p default 0.05; repeat_penalty default 1.1",
    identify,
    Launch(arguments, "/v1/models", check_servable, "llama_cpp.server"),
)
