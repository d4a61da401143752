"""What every serving engine module declares: how it spells the protocol's sampling, how
it is told from what a server reports, and, where a run's job can start it, how."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skilleval.checkpoints.layout import model_dir
from skilleval.errors import ServiceError
from skilleval.protocol import sections

Identified = tuple[str | None, str | None, str]  # (engine, version, how it was told)


@dataclass(frozen=True)
class Launch:
    """How a run's job starts the engine on its leased cards and port: the arguments after
    the protocol's launch command, for (the checkpoint's weights, the protocol's
    model_server, the port, the name the job gives its server); the path that answers 200
    once it serves; the refusal of a checkpoint the engine cannot load, made before any card
    is leased where the launch command runs the engine's own ``program`` (a stand-in of the
    tests may serve what the engine cannot); and the path it is given the weights by."""

    arguments: Callable[[str, sections.ModelServer, int, str], list[str]]
    ready_path: str
    check_servable: Callable[[str], None]
    program: str
    served_path: Callable[[str], str] = field(default=lambda weights: str(Path(weights).absolute()))

    def runs_engine(self, kind: str, launch: sections.Launch) -> bool:
        """Whether the protocol's launch runs this engine's program: its module or command
        (``python -m sglang.launch_server``), or, under docker, an image of that name."""
        if kind == "docker":
            return self.program.split(".")[0] in launch.image
        return any(
            word == self.program or word.startswith(f"{self.program}.") for word in launch.command
        )


def needs_architectures(engine: str) -> Callable[[str], None]:
    """The refusal of a checkpoint an engine that loads a Hugging Face directory cannot
    serve: sglang and vLLM read its config.json through transformers' AutoConfig and pick
    the model class from its ``architectures`` (sglang/srt/model_loader/utils.py,
    vllm/model_executor/models/registry.py). The simulated world's checkpoint names none
    (model_type shopsim-policy)."""

    def check(weights: str) -> None:
        config_file = model_dir(weights) / "config.json"
        try:
            architectures = json.loads(config_file.read_text()).get("architectures")
        except (OSError, ValueError, AttributeError):
            architectures = None
        if not architectures:
            raise ServiceError(
                f"{config_file} is missing or names no architectures, so {engine} cannot "
                f"serve {config_file.parent} (the simulated world's checkpoint, or not a "
                "Hugging Face checkpoint); the real path needs real checkpoints: add "
                "--configfile config/examples/real-path.yaml (or point checkpoints.*.path at "
                "them), or leave model_server local for the simulated world"
            )

    return check


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
