"""The lab adapter of the tests: the template (docs/templates/lab_environment) filled in
for skilleval serve-world's environment server with a client of its own."""

from __future__ import annotations

import json
import threading
from typing import Any

import urllib3

from lab_env.scoring import rewards_of
from skilleval.errors import InfrastructureError
from skilleval.records.env import StepResult
from skilleval.records.policy import ToolCall


class LabShopEpisode:
    def __init__(self, shop: LabShop, episode_id: str, instruction: str) -> None:
        self.shop, self.episode_id, self.instruction = shop, episode_id, instruction
        self.closed = False

    def step(self, call: ToolCall) -> StepResult:
        body = {"name": call.name, "arguments": call.arguments}
        data = self.shop.call("POST", f"/episodes/{self.episode_id}/step", body)
        return StepResult(str(data["observation"]), bool(data["done"]))

    def rewards(self) -> dict[str, float]:
        return rewards_of(self.shop.call("GET", f"/episodes/{self.episode_id}/rewards"))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.shop.call("DELETE", f"/episodes/{self.episode_id}")
            self.shop.slots.release()


class LabShop:
    def __init__(self, settings: dict[str, Any]) -> None:
        self.url = settings["url"].rstrip("/")
        self.slots = threading.BoundedSemaphore(settings["slots"])
        self.pool = urllib3.PoolManager(maxsize=settings["slots"] + 2)
        self.listed: list[dict[str, Any]] | None = None

    def call(self, method: str, path: str, body: Any = None) -> Any:
        try:
            reply = self.pool.request(
                method, self.url + path, body=None if body is None else json.dumps(body),
                headers={"Content-Type": "application/json"}, timeout=30.0, retries=False,
            )  # fmt: skip
        except urllib3.exceptions.HTTPError as error:
            raise InfrastructureError(f"lab shop {self.url} unreachable: {error}") from None
        if reply.status >= 500 or reply.status == 404:
            raise InfrastructureError(f"lab shop {path} answered HTTP {reply.status}")
        return json.loads(reply.data) if reply.data else {}

    def tools(self) -> list[dict[str, Any]]:
        if self.listed is None:
            self.listed = list(self.call("GET", "/info")["tools"])
        return self.listed

    def start(self, task_id: str) -> LabShopEpisode:
        self.slots.acquire()
        try:
            data = self.call("POST", "/episodes", {"task_id": task_id})
        except BaseException:
            self.slots.release()  # no episode was opened: its slot is free again
            raise
        return LabShopEpisode(self, data["episode_id"], data["instruction"])
