"""A lab adapter that fails like a built-in one: its server's outages are waited out.

The built-in ``http`` adapter sends each request through the run's retry layer
(serving.outage.ServerCalls). A lab adapter raises ``InfrastructureError`` instead; this
wrapper sends its ``tools()`` and ``start()`` through the same layer, so a lab server not
yet up when a run (or ``skilleval env check --wait``) starts is waited out up to the
outage budget, a line in the run log every few seconds, and then stops the run with one
line (OutageError), never a traceback; a task the server fails again and again while it
serves the others ends as that task's failure (serving.outage). An episode's steps and
rewards are left to the run's episode restarts, as the built-in adapter's are.
"""

from __future__ import annotations

from typing import Any

from skilleval.errors import InfrastructureError
from skilleval.records.env import EpisodeHandle
from skilleval.serving.outage import ServerCalls


class GuardedAdapter:
    """``adapter`` with its outages waited out through ``calls``; its declared metrics
    (env.metrics) are its own."""

    def __init__(self, adapter: Any, calls: ServerCalls) -> None:
        self.adapter, self.calls = adapter, calls
        self.metrics = getattr(adapter, "metrics", None)

    def tools(self) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = self.calls.call(
            self.adapter.tools, outages=(InfrastructureError,)
        )
        return tools

    def start(self, task_id: str) -> EpisodeHandle:
        episode: EpisodeHandle = self.calls.call(
            lambda: self.adapter.start(task_id), outages=(InfrastructureError,), task=task_id
        )
        return episode
