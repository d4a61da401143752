"""sglang: its sampling dialect, how it is told, how its identity is checked against the
protocol and the run's checkpoint (every field the run pins must be reported: fail
closed; the registered checkpoint served; the protocol's flags launched), and how a run's
job launches it on its leased cards (sglang 0.5's flags, by their full names)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skilleval.checkpoints.layout import model_dir
from skilleval.protocol.sections import Served
from skilleval.serving.engines.base import Engine, Identified, Launch, needs_architectures

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


def check_identity(identity: dict[str, Any], server: Served, weights: str) -> list[str]:
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
        "tp_size": server.tp,
        "dp_size": server.dp_size,
        "tool_call_parser": server.tool_call_parser,
        "reasoning_parser": server.reasoning_parser,
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


def identify(identity: Mapping[str, Any]) -> Identified | None:
    if identity.get("identity_endpoints"):
        version = (identity.get("server") or {}).get("version")
        return "sglang", version, "it answers sglang's identity endpoints"
    return None


def model_flags(
    model_path: str,
    tp: int | None,
    dp: int | None,
    tool_call_parser: str | None,
    reasoning_parser: str | None,
) -> list[str]:
    """sglang's flags for the served model, by their full names (sglang 0.5); a value the
    protocol leaves null is left to sglang."""
    given = {
        "--tp-size": tp,
        "--dp-size": dp,
        "--tool-call-parser": tool_call_parser,
        "--reasoning-parser": reasoning_parser,
    }
    flags = ["--model-path", model_path]
    for flag, value in given.items():
        if value is not None:
            flags += [flag, str(value)]
    return flags


def served_path(weights: str) -> str:
    """The checkpoint directory as the server is given it: absolute, since a container starts
    in its own working directory, but not resolved, since the identity check compares its
    name with the registered checkpoint's (a symlinked checkpoint keeps its name)."""
    return str(model_dir(weights).absolute())


def sglang_arguments(weights: str, server: Served, port: int, name: str) -> list[str]:
    return [
        *model_flags(
            served_path(weights),
            server.tp,
            server.dp_size,
            server.tool_call_parser,
            server.reasoning_parser,
        ),
        "--served-model-name",
        name,
        # A parameter a request leaves out must not come from the checkpoint's
        # generation_config.json (sglang's default, --sampling-defaults model).
        "--sampling-defaults",
        "openai",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]


ENGINE = Engine(
    "sglang",
    -1,
    {"min_p": 0.0, "repetition_penalty": 1.0},
    "sglang/srt/sampling/sampling_params.py: top_k -1 disables; defaults from the "
    "checkpoint's generation_config.json unless --sampling-defaults openai",
    identify,
    Launch(sglang_arguments, "/health", needs_architectures("sglang"), "sglang", served_path),
)
