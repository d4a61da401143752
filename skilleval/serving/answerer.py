"""What answered a run, as its server states it: one identity for every episode.

The identity is read from the server at the run's start, again after every reconnect that
follows an outage, and at its end; every episode's record carries its digest and the
model its replies named. A journal, a reconnect or an end that finds another identity
stops the run (``AnswererChanged``): episodes of two models are never combined. Addresses
are never part of it, nor the name a launched server is given for its lease.

Where each engine reports its weights: sglang's /model_info ``model_path`` (and
``weight_version``), vLLM's /v1/models ``root`` (vllm/entrypoints/openai/serving_models.py),
llama.cpp's llama-server /props ``model_path`` and ``build_info``
(tools/server/server.cpp). llama-cpp-python reports its model's path as the model id
unless it was given ``--model_alias``; the OpenAI API reports a dated model id per reply.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from skilleval.errors import AnswererChanged
from skilleval.storage.hashing import canonical_hash

# What a served model name is replaced by when the run launched the server: the name it
# gives its server names the lease (serving.processes.served_model_name), an address.
LAUNCHED_NAME = "(named by the run's launcher)"


@dataclass(frozen=True)
class Answerer:
    """The server's own statement of what answers: none of its fields is an address."""

    model: str | None
    engine: str | None
    engine_version: str | None
    weights: str | None
    chat_template: str | None = None  # the digest of the template the engine reports

    def as_json(self) -> dict[str, str | None]:
        return asdict(self)

    @property
    def digest(self) -> str:
        return canonical_hash(self.as_json())[:16]

    def describe(self) -> str:
        engine = " ".join(str(p) for p in (self.engine, self.engine_version) if p) or "engine ?"
        said = [f"model {self.model}", engine]
        said.append(f"weights {self.weights}" if self.weights else "weights not reported")
        if self.chat_template:
            said.append(f"chat template {self.chat_template}")
        return f"{', '.join(said)} [{self.digest}]"

    def stamp(self, reply_models: tuple[str, ...]) -> dict[str, Any]:
        """What an episode's record says answered it."""
        return {
            "identity": self.digest,
            "server": self.describe(),
            "reply_models": sorted(set(reply_models)),
        }


def answerer_of(
    identity: Mapping[str, Any],
    model: str | None,
    engine: str | None,
    engine_version: str | None,
    launched: bool = False,
) -> Answerer:
    """The answering identity of a server's report (serving.service.fetch_identity)."""
    model_info = identity.get("model_info") or {}
    props = identity.get("props") or {}
    weights = model_info.get("model_path") or (identity.get("server") or {}).get("model_path")
    if weights and model_info.get("weight_version"):
        weights = f"{weights} (weight_version {model_info['weight_version']})"
    weights = weights or props.get("model_path") or (identity.get("roots") or {}).get(model)
    template = props.get("chat_template_digest")
    return Answerer(
        LAUNCHED_NAME if launched else model,
        engine,
        engine_version,
        str(weights) if weights else None,
        str(template) if template else None,
    )


def template_digest(template: str) -> str:
    return hashlib.sha256(template.encode()).hexdigest()[:16]


def refuse_change(run: str, known: Mapping[str, Any], found: Answerer, where: str) -> None:
    """Stop the run when ``found`` is not what answered it so far: ``known`` is an episode's
    stamp (``Answerer.stamp``), or the stamp of the server at the run's start."""
    if known["identity"] == found.digest:
        return
    raise AnswererChanged(
        f"run {run!r}: {where} the model server is {found.describe()}, but the run's episodes "
        f"were answered by {known['server']}; episodes of two models are never combined. Fix: "
        f"restore the server the run began with, or move the run's episodes aside with "
        f"skilleval clean {run} --archive and build it again"
    )
