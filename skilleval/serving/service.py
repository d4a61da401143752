"""The model service of a run: what it says it serves, checked against protocol and checkpoint."""

from __future__ import annotations

import logging
import shlex
from pathlib import Path
from typing import Any

from urllib3.exceptions import HTTPError

from skilleval.checkpoints.files import checkpoint_fingerprint
from skilleval.checkpoints.layout import model_dir
from skilleval.errors import ServiceError
from skilleval.serving.http import JsonClient

log = logging.getLogger(__name__)


def server_root(base_url: str) -> str:
    return base_url.rstrip("/").removesuffix("/v1")


# sglang's identity endpoints, newest first: /get_* were deprecated in 0.5 (warning per call).
IDENTITY_ENDPOINTS = {
    "current": ("/model_info", "/server_info"),
    "deprecated": ("/get_model_info", "/get_server_info"),
}
# What skilleval serve-world reports as its model's architecture (world/server.py).
SIMULATED_ARCHITECTURE = "ShopSimPolicy"
MODEL_INFO_KEYS = (
    "model_path",
    "served_model_name",
    "preferred_sampling_params",
    "weight_version",
    "tool_call_parser",
    "reasoning_parser",
    "architectures",
)
SERVER_INFO_KEYS = (
    "model_path",
    "served_model_name",
    "sampling_defaults",
    "preferred_sampling_params",
    "tp_size",
    "dp_size",
    "tool_call_parser",
    "reasoning_parser",
    "version",
    "launch_command",
)
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


def _get_json(client: JsonClient, path: str) -> dict[str, Any] | None:
    url = client.base_url + path
    try:
        response = client.get(path)
    except HTTPError as error:
        raise ServiceError(f"model server {url} unreachable: {error}") from error
    if response.status != 200:
        return None
    try:
        body = response.json()
    except ValueError as error:
        raise ServiceError(
            f"model server {url} answered HTTP 200 with no JSON: {response.text[:200]!r}"
        ) from error
    return body if isinstance(body, dict) else None


def fetch_identity(base_url: str, timeout_s: float = 10.0) -> dict[str, Any]:
    """What the server says it serves: sglang's info endpoints (current, else deprecated),
    and /v1/models; only fields that cannot change while a run lasts are kept."""
    root = server_root(base_url)
    identity: dict[str, Any] = {"base_url": base_url, "identity_endpoints": None}
    model_info: dict[str, Any] = {}
    server_info: dict[str, Any] = {}
    client = JsonClient(root, timeout_s, connections=1)
    for generation, (model_path, server_path) in IDENTITY_ENDPOINTS.items():
        found = _get_json(client, model_path)
        if found is not None:
            model_info, server_info = found, _get_json(client, server_path) or {}
            identity["identity_endpoints"] = f"{generation}: {model_path}, {server_path}"
            break
    api_prefix = base_url.rstrip("/").removeprefix(root)  # "/v1", as root was cut from it
    models = _get_json(client, api_prefix + "/models") or {}
    client.close()
    identity["models"] = [m["id"] for m in models.get("data", [])]
    identity["model_info"] = {k: model_info[k] for k in MODEL_INFO_KEYS if k in model_info}
    identity["server"] = {k: server_info[k] for k in SERVER_INFO_KEYS if k in server_info}
    return identity


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
    launched = launch_arguments(served.get("launch_command"))
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


class Service:
    """The model service a run talks to; its identity is recorded at start and end."""

    def __init__(
        self,
        backend: str,
        checkpoint_id: str,
        weights: str,
        base_url: str | None = None,
        server: dict[str, Any] | None = None,
    ) -> None:
        self.backend, self.checkpoint_id, self.weights = backend, checkpoint_id, weights
        self.base_url, self.server = base_url, server or {}
        self.checked: dict[str, Any] = {}
        self.identity_check = "not checked"

    def identity(self) -> dict[str, Any]:
        base = {
            "backend": self.backend,
            "checkpoint_id": self.checkpoint_id,
            "weights_fingerprint": checkpoint_fingerprint(self.weights),
        }
        if self.backend == "sim":
            return {**base, "model_path": self.weights}
        assert self.base_url is not None
        return {**base, **fetch_identity(self.base_url)}

    def check(self) -> dict[str, Any]:
        """The identity at the run's start, checked before any request; ``identity: trust``
        skips the check for a server that cannot report, and the record says so."""
        identity = self.identity()
        if self.backend == "sim":
            self.identity_check = "in-process"
        elif self.server.get("identity", "verify") == "trust":
            self.identity_check = "trusted"
            log.warning("model server at %s is trusted unchecked (identity: trust)", self.base_url)
        else:
            problems = check_identity(identity, self.server, self.weights)
            if problems:
                raise ServiceError(
                    f"model server at {self.base_url} does not match the run: "
                    + "; ".join(problems)
                    + ". Serve the registered checkpoint with the protocol's flags."
                )
            self.identity_check = "verified"
        self.checked = identity
        return identity

    def simulation(self) -> dict[str, Any]:
        """Whether what answered the run is simulated, from what it said it is: the sim
        policy in process, or a server whose identity is the project's simulated world
        (skilleval serve-world reports the ShopSimPolicy architecture and its own launch
        line); unknown (None) when the server reported neither."""
        if self.backend == "sim":
            return {"simulated": True, "by": "the sim policy, in process"}
        info = self.checked.get("model_info", {})
        launch = str(self.checked.get("server", {}).get("launch_command") or "")
        architectures = info.get("architectures") or []
        if SIMULATED_ARCHITECTURE in architectures or launch.startswith("skilleval serve-world"):
            return {
                "simulated": True,
                "by": "the project's simulated world (skilleval serve-world)",
            }
        if not architectures and not launch:
            return {
                "simulated": None,
                "by": "the server reported neither its architecture nor its launch command",
            }
        return {"simulated": False, "by": f"a model server serving {info.get('model_path')}"}

    def served_model(self) -> str:
        """Model name to send: the first the server lists when the run started."""
        models = self.checked.get("models") or []
        return str(models[0]) if models else "default"
