"""Wire format of the environment server, isolated here (client side and routes).

    GET    /info                      -> {"slots", "world", "tools"}
    POST   /episodes {"task_id"}      -> {"episode_id", "instruction"}  (503 if no free slot)
    POST   /episodes/{id}/step {"name", "arguments"} -> {"observation", "done"}
    GET    /episodes/{id}/rewards     -> {"reward", "r_*", ...}
    DELETE /episodes/{id}             -> frees the slot

A different server (the lab's ShopSimulator) needs only a new version of this module.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import httpx
from tenacity import (
    retry,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from skilleval.env.types import StepResult
from skilleval.errors import InfrastructureError
from skilleval.policy.types import ToolCall

RETRYABLE = (httpx.TransportError, InfrastructureError)


def _checked(response: httpx.Response) -> dict[str, Any]:
    if response.status_code == 429 or response.status_code >= 500:
        retry_after = response.headers.get("Retry-After")
        raise InfrastructureError(
            f"environment server HTTP {response.status_code}",
            float(retry_after) if retry_after else None,
        )
    response.raise_for_status()
    data: dict[str, Any] = response.json()
    return data


_retrying = retry(
    retry=retry_if_exception_type(RETRYABLE),
    wait=wait_exponential(multiplier=0.05, max=2.0),
    stop=stop_after_attempt(5),
    reraise=True,
)


@dataclass
class HttpEpisode:
    client: httpx.Client
    episode_id: str
    instruction: str
    release: Any
    closed: bool = field(default=False)

    @_retrying
    def step(self, call: ToolCall) -> StepResult:
        data = _checked(
            self.client.post(
                f"/episodes/{self.episode_id}/step",
                json={"name": call.name, "arguments": call.arguments},
            )
        )
        return StepResult(str(data["observation"]), bool(data["done"]))

    @_retrying
    def rewards(self) -> dict[str, float]:
        data = _checked(self.client.get(f"/episodes/{self.episode_id}/rewards"))
        return {k: float(v) for k, v in data.items()}

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.client.delete(f"/episodes/{self.episode_id}")
        except httpx.TransportError:
            pass  # the server reclaims slots of episodes it no longer hears from
        finally:
            self.release()


class HttpEnvironment:
    """Client of an environment server; never holds more episodes than it has slots."""

    def __init__(self, url: str, slots: int, timeout_s: float = 60.0) -> None:
        self.client = httpx.Client(base_url=url, timeout=timeout_s, trust_env=False)
        self.slots = threading.BoundedSemaphore(slots)
        self._tools: list[dict[str, Any]] | None = None

    @_retrying
    def info(self) -> dict[str, Any]:
        try:
            return _checked(self.client.get("/info"))
        except httpx.TransportError as error:
            raise InfrastructureError(f"environment server unreachable: {error}") from error

    def tools(self) -> list[dict[str, Any]]:
        if self._tools is None:
            self._tools = list(self.info()["tools"])
        return self._tools

    def start(self, task_id: str) -> HttpEpisode:
        self.slots.acquire()
        try:
            data = self._open(task_id)
        except BaseException:
            self.slots.release()
            raise
        return HttpEpisode(self.client, data["episode_id"], data["instruction"], self.slots.release)

    @_retrying
    def _open(self, task_id: str) -> dict[str, Any]:
        return _checked(self.client.post("/episodes", json={"task_id": task_id}))
