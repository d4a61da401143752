"""The model service of a run: what it says it serves, checked against protocol and checkpoint."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import httpx

from skilleval.checkpoints.files import checkpoint_fingerprint
from skilleval.errors import ServiceError

log = logging.getLogger(__name__)


def server_root(base_url: str) -> str:
    return base_url.rstrip("/").removesuffix("/v1")


def fetch_identity(base_url: str, timeout_s: float = 10.0) -> dict[str, Any]:
    """What the server says it serves: sglang's info endpoints, else /v1/models."""
    root = server_root(base_url)
    identity: dict[str, Any] = {"base_url": base_url}
    with httpx.Client(timeout=timeout_s, trust_env=False) as client:
        for path in ("/get_model_info", "/get_server_info"):
            try:
                response = client.get(root + path)
            except httpx.TransportError as error:
                raise ServiceError(f"model server {root} unreachable: {error}") from error
            if response.status_code == 200:
                identity[path.strip("/")] = response.json()
        models = client.get(base_url.rstrip("/") + "/models")
        if models.status_code == 200:
            identity["models"] = [m["id"] for m in models.json().get("data", [])]
    keep = ("model_path", "tp_size", "dp_size", "tool_call_parser", "reasoning_parser", "version")
    server = identity.pop("get_server_info", {})
    identity["server"] = {k: server.get(k) for k in keep if k in server}
    return identity


def check_identity(identity: dict[str, Any], server: dict[str, Any], weights: str) -> list[str]:
    """Differences between the served model and what the run requires."""
    problems = []
    model_path = (identity.get("get_model_info") or {}).get("model_path") or identity["server"].get(
        "model_path"
    )
    expected = Path(weights).parent
    if model_path is not None and Path(model_path).name != expected.name:
        problems.append(f"serves {model_path}, but the run's checkpoint is {expected}")
    wanted = {
        "tp_size": server["tp"],
        "dp_size": server["dp_size"],
        "tool_call_parser": server["tool_call_parser"],
        "reasoning_parser": server["reasoning_parser"],
    }
    for key, value in wanted.items():
        served = identity["server"].get(key)
        if value is not None and served is not None and served != value:
            problems.append(f"{key} is {served!r}, the protocol requires {value!r}")
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
        identity = self.identity()
        if self.backend != "sim":
            problems = check_identity(identity, self.server, self.weights)
            if problems:
                raise ServiceError(
                    f"model server at {self.base_url} does not match the run: "
                    + "; ".join(problems)
                    + ". Serve the registered checkpoint with the protocol's flags."
                )
        self.checked = identity
        return identity

    def served_model(self) -> str:
        """Model name to send: the first the server lists when the run started."""
        models = self.checked.get("models") or []
        return str(models[0]) if models else "default"
