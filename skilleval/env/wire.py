"""Wire format of the environment server, isolated here (client side and routes).

    GET    /info                      -> {"slots", "world", "tools"}
    POST   /episodes {"task_id"}      -> {"episode_id", "instruction"}  (503 if no free slot)
    POST   /episodes/{id}/step {"name", "arguments"} -> {"observation", "done"}
    GET    /episodes/{id}/rewards     -> {"reward", "r_*", ...}
    DELETE /episodes/{id}             -> frees the slot

Opening, reading rewards and closing may be repeated; a step may not (it can buy), so a
step is retried only when its request never reached the server. An episode the server no
longer knows (it restarted) is abandoned and its task restarted. A different server (the
lab's ShopSimulator) needs only a new version of this module.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from typing import Any

from urllib3.exceptions import HTTPError

from skilleval.errors import InfrastructureError
from skilleval.records.env import StepResult
from skilleval.records.policy import ToolCall
from skilleval.serving.http import JsonClient, Reply
from skilleval.serving.outage import RetryLedger, ServerCalls, raise_if_retryable


def _checked(response: Reply, episode_id: str | None = None) -> dict[str, Any]:
    raise_if_retryable(response)
    if response.status == 404 and episode_id is not None:
        raise InfrastructureError(
            f"environment server no longer knows episode {episode_id} (restarted?)",
            kind="episode_lost",
        )
    response.raise_for_status()
    data: dict[str, Any] = response.json()
    return data


@dataclass
class HttpEpisode:
    client: JsonClient
    calls: ServerCalls
    episode_id: str
    instruction: str
    release: Any
    closed: bool = field(default=False)

    def step(self, call: ToolCall) -> StepResult:
        data = self.calls.call(
            lambda: _checked(
                self.client.post(
                    f"/episodes/{self.episode_id}/step",
                    {"name": call.name, "arguments": call.arguments},
                ),
                self.episode_id,
            ),
            idempotent=False,
        )
        return StepResult(str(data["observation"]), bool(data["done"]))

    def rewards(self) -> dict[str, float]:
        data = self.calls.call(
            lambda: _checked(
                self.client.get(f"/episodes/{self.episode_id}/rewards"), self.episode_id
            )
        )
        return {k: float(v) for k, v in data.items()}

    def close(self) -> None:
        """Free the slot once; a server that cannot be told reclaims it on its own."""
        if self.closed:
            return
        self.closed = True
        try:
            with contextlib.suppress(HTTPError):
                self.client.delete(f"/episodes/{self.episode_id}")
        finally:
            self.release()


class HttpEnvironment:
    """Client of an environment server; never holds more episodes than it has slots."""

    def __init__(
        self,
        url: str,
        slots: int,
        ledger: RetryLedger,
        outage_budget_s: float,
        timeout_s: float = 60.0,
    ) -> None:
        self.client = JsonClient(url, timeout_s, connections=slots + 4)
        self.calls = ServerCalls("environment", url, ledger, outage_budget_s)
        self.slots = threading.BoundedSemaphore(slots)
        self._tools: list[dict[str, Any]] | None = None

    def info(self) -> dict[str, Any]:
        return self.calls.call(lambda: _checked(self.client.get("/info")))

    def tools(self) -> list[dict[str, Any]]:
        if self._tools is None:
            self._tools = list(self.info()["tools"])
        return self._tools

    def start(self, task_id: str) -> HttpEpisode:
        self.slots.acquire()
        try:
            data = self.calls.call(
                lambda: _checked(self.client.post("/episodes", {"task_id": task_id}))
            )
        except BaseException:
            self.slots.release()
            raise
        return HttpEpisode(
            self.client, self.calls, data["episode_id"], data["instruction"], self.slots.release
        )
