"""The sampling a stand-in model server applies to a request, as sglang 0.5.23 applies it.

sglang fills a parameter the request leaves out from the checkpoint's generation_config.json
under ``--sampling-defaults model`` (its default), else from OpenAI's defaults
(``ChatCompletionRequest.to_sampling_params``: request value > generation_config > OpenAI
default; ``ModelConfig.get_default_sampling_params`` names the parameters read from the
file). The stand-in also keeps what it applied, which sglang does not report.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

# sglang/srt/entrypoints/openai/protocol.py, ChatCompletionRequest._DEFAULT_SAMPLING_PARAMS
OPENAI_SAMPLING_DEFAULTS = {
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": -1,
    "min_p": 0.0,
    "repetition_penalty": 1.0,
}
# The stand-in's own window on what it applied: each distinct set of values, with its count.
APPLIED_SAMPLING_PATH = "/skilleval/applied_sampling"


def checkpoint_sampling_defaults(model_path: str, sampling_defaults: str) -> dict[str, Any]:
    """What sglang takes from the checkpoint's generation_config.json, if anything."""
    config_file = Path(model_path) / "generation_config.json"
    if sampling_defaults != "model" or not config_file.is_file():
        return {}
    config = json.loads(config_file.read_text())
    return {p: config[p] for p in OPENAI_SAMPLING_DEFAULTS if config.get(p) is not None}


class ServerSampling:
    """One server's sampling rule and the record of what it applied."""

    def __init__(self, model_path: str, sampling_defaults: str) -> None:
        self.from_checkpoint = checkpoint_sampling_defaults(model_path, sampling_defaults)
        self.applied: Counter[str] = Counter()
        self.lock = threading.Lock()

    def apply(self, request: dict[str, Any]) -> dict[str, Any]:
        values = {
            name: request[name]
            if request.get(name) is not None
            else self.from_checkpoint.get(name, default)
            for name, default in OPENAI_SAMPLING_DEFAULTS.items()
        }
        with self.lock:
            self.applied[json.dumps(values, sort_keys=True)] += 1
        return values

    def report(self) -> list[dict[str, Any]]:
        with self.lock:
            return [{"applied": json.loads(k), "requests": n} for k, n in self.applied.items()]
