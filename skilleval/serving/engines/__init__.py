"""The serving engines a run may talk to, one module each (sglang, vllm, llama_server,
llama_cpp_python, hosted): how each spells the protocol's sampling, how it is told from
what a server reports, and, where a run's job can start it, its launch. Adding an engine
is one module here that defines ENGINE: the registry finds it, and the config schema's
list of engines is the registry's (config.schema).

The protocol says "no top_k"; each engine reads another value as "disabled", and each
fills the sampling parameters a request leaves out from its own defaults. A request must
therefore be written in the dialect of the engine that answers it: the engine is
identified from what the server reports (``identify``), or declared in the protocol
(``model_server.engine``) for a server that reports nothing; an unknown engine with a
value that needs a dialect is a refusal, never a guess.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from typing import Any

from skilleval.errors import ServiceError
from skilleval.serving.engines.base import Engine, Identified, Launch


def registered() -> dict[str, Engine]:
    """Every module of this package that defines ENGINE, by the engine's name. Each tells
    its engine by a mark only that engine's server gives, so the order they are asked in
    decides nothing."""
    found = {}
    for module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        engine = getattr(importlib.import_module(f"{__name__}.{module}"), "ENGINE", None)
        if isinstance(engine, Engine):
            found[engine.name] = engine
    return found


ENGINES: dict[str, Engine] = registered()
__all__ = ["ENGINES", "Engine", "Identified", "Launch", "engine_of", "identify"]


def identify(identity: Mapping[str, Any]) -> Identified:
    """(engine name, its version, how it was told) from what a server reported
    (serving.service.fetch_identity); (None, None, why) when nothing identifies it."""
    for engine in ENGINES.values():
        found = engine.identify(identity)
        if found is not None:
            return found
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
