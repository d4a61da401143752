"""What every serving engine module declares: how it spells the protocol's sampling, how
it is told from what a server reports, and, where a run's job can start it, how."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Identified = tuple[str | None, str | None, str]  # (engine, version, how it was told)


@dataclass(frozen=True)
class Launch:
    """How a run's job starts the engine on its leased cards and port: the arguments after
    the protocol's launch command, for (the checkpoint's weights, the protocol's
    model_server, the port, the name the job gives its server); the path that answers 200
    once it serves; the refusal of a checkpoint the engine cannot load, made before any card
    is leased where the launch command runs the engine's own ``program`` (a stand-in of the
    tests may serve what the engine cannot); and the path it is given the weights by."""

    arguments: Callable[[str, Mapping[str, Any], int, str], list[str]]
    ready_path: str
    check_servable: Callable[[str], None]
    program: str
    served_path: Callable[[str], str] = field(default=lambda weights: str(Path(weights).absolute()))

    def runs_engine(self, kind: str, launch: Mapping[str, Any]) -> bool:
        """Whether the protocol's launch runs this engine's program: its module or command
        (``python -m sglang.launch_server``), or, under docker, an image of that name."""
        if kind == "docker":
            return self.program.split(".")[0] in str(launch.get("image", ""))
        return any(
            word == self.program or str(word).startswith(f"{self.program}.")
            for word in launch["command"]
        )


def never(identity: Mapping[str, Any]) -> Identified | None:
    """An engine that reports nothing telling: only its declaration names it."""
    return None


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
    # (this engine, its version, how it was told) from a server's report
    # (serving.service.fetch_identity); None when the report is not this engine's.
    identify: Callable[[Mapping[str, Any]], Identified | None] = never
    launch: Launch | None = None

    def describe(self) -> dict[str, Any]:
        return {
            "engine": self.name,
            "top_k_disabled": self.top_k_disabled,
            "neutral": dict(self.neutral),
        }
