"""sglang's identity, checked against the protocol and the run's checkpoint: the server
must report every field the run pins (fail closed), serve the registered checkpoint and
have been launched with the protocol's flags."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from skilleval.checkpoints.layout import model_dir

# Flags of sglang's launch_command the protocol pins, by every spelling sglang accepts.
LAUNCH_FLAGS = {
    "--tp-size": "tp_size",
    "--tensor-parallel-size": "tp_size",
    "--dp-size": "dp_size",
    "--data-parallel-size": "dp_size",
    "--tool-call-parser": "tool_call_parser",
    "--reasoning-parser": "reasoning_parser",
    "--sampling-defaults": "sampling_defaults",
}


def launch_arguments(launch_command: str | None) -> dict[str, str]:
    """The pinned flags a server was started with, from sglang's recorded launch_command."""
    words = shlex.split(launch_command or "")
    found = {}
    for i, word in enumerate(words):
        flag, _, inline = word.partition("=")
        if flag in LAUNCH_FLAGS:
            value = inline or (words[i + 1] if i + 1 < len(words) else "")
            found[LAUNCH_FLAGS[flag]] = value
    return found


# What a server must report before a run may start: without any one of them the run could
# not tell the protocol's server from another (fail closed, never a silent pass).
REQUIRED_FIELDS = (
    "model_path",
    "tp_size",
    "dp_size",
    "tool_call_parser",
    "reasoning_parser",
    "sampling_defaults",
)
NO_IDENTITY = (
    "it answers none of sglang's identity endpoint pairs (/model_info and /server_info, "
    "nor /get_model_info and /get_server_info), so what it serves cannot be checked; serve "
    "the run with sglang, or set model_server.identity: trust to run unchecked (recorded in "
    "the run's summary and in the paper's notice)"
)


def same_checkpoint(served: str, weights: str) -> bool:
    """The server's model path is the run's checkpoint directory: the same absolute path,
    or two paths that resolve to one directory (a symlinked checkpoint)."""
    expected = model_dir(weights)
    return Path(served) == expected.absolute() or Path(served).resolve() == expected.resolve()


def check_identity(identity: dict[str, Any], server: dict[str, Any], weights: str) -> list[str]:
    """Differences between the served model and what the run requires; a field the server
    does not report is a difference too."""
    if identity.get("identity_endpoints") is None:
        return [NO_IDENTITY]
    model_info, served = identity.get("model_info") or {}, identity.get("server") or {}

    def reported(key: str) -> Any:
        return model_info.get(key, served.get(key))

    problems = []
    missing = [key for key in REQUIRED_FIELDS if reported(key) is None]
    if missing:
        problems.append(f"it does not report {', '.join(missing)}")
    model_path = reported("model_path")
    if model_path is not None and not same_checkpoint(str(model_path), weights):
        problems.append(
            f"serves {model_path}, but the run's checkpoint is {model_dir(weights).absolute()}"
        )
    wanted = {
        "tp_size": server["tp"],
        "dp_size": server["dp_size"],
        "tool_call_parser": server["tool_call_parser"],
        "reasoning_parser": server["reasoning_parser"],
        # any other source of defaults could change a parameter a request leaves out
        "sampling_defaults": "openai",
    }
    try:
        launched = launch_arguments(served.get("launch_command"))
    except ValueError as error:  # shlex: an unbalanced quote in sglang's " ".join(argv)
        return [
            *problems,
            f"its launch_command cannot be read as a command line ({error}: "
            f"{str(served.get('launch_command'))[:200]!r}), so its flags cannot be checked; "
            "start it from a model path without quotes",
        ]
    for key, value in wanted.items():
        if value is None:
            continue
        if reported(key) is not None and reported(key) != value:
            problems.append(f"{key} is {reported(key)!r}, the protocol requires {value!r}")
        if key in launched and launched[key] != str(value):
            problems.append(
                f"launch_command sets {key} to {launched[key]!r}, the protocol requires {value!r}"
            )
    return problems
