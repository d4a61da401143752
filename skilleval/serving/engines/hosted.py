"""A hosted API that speaks the OpenAI chat completions protocol: it reports no engine,
so a protocol declares it (model_server.engine: openai)."""

from __future__ import annotations

from skilleval.serving.engines.base import Engine

ENGINE = Engine(
    "openai",
    None,
    {},
    "the OpenAI chat completions API has no top_k, min_p or repetition penalty",
)
