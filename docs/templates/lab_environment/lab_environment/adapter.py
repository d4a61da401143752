"""Template of an environment adapter: fill the five calls marked FILL for your server.

skilleval makes ``LabEnvironment(settings)`` once per run, with the protocol's
``environment`` section (``url``, ``slots`` and your own ``options``), and calls it from
several threads at once (``runtime.concurrency`` episodes). The contract, which
``skilleval env check`` runs against your live server, is in skilleval/env/contract.py:

* ``tools()``: OpenAI function tools, the same list on every call;
* ``start(task_id)``: a new episode of the task, with a non-empty ``instruction``;
* ``step(call)``: a ``StepResult``; an unknown tool or bad arguments are the model's mistake,
  answered in the observation, never raised;
* ``rewards()``: ``reward`` in [0, 1] and ``r_success`` 0 or 1, floats, stable across reads;
* ``close()``: may be called twice.

Raise ``skilleval.errors.InfrastructureError`` when the server cannot answer (timeout,
5xx, a lost episode): the run restarts that episode and never scores it. Every edit to
this module makes the runs that used it stale (its digest is in their evidence identity).
"""

from __future__ import annotations

from typing import Any

from skilleval.records.env import StepResult
from skilleval.records.policy import ToolCall


class LabEpisode:
    def __init__(self, environment: LabEnvironment, episode_id: str, instruction: str) -> None:
        self.environment, self.episode_id, self.instruction = environment, episode_id, instruction

    def step(self, call: ToolCall) -> StepResult:
        # FILL: send call.name and call.arguments to your server; return its observation
        # text and whether the episode is over.
        raise NotImplementedError("FILL LabEpisode.step")

    def rewards(self) -> dict[str, float]:
        # FILL: your server's rewards of this episode: {"reward": ..., "r_success": ...}.
        raise NotImplementedError("FILL LabEpisode.rewards")

    def close(self) -> None:
        # FILL: free the episode on your server; a second call does nothing.
        raise NotImplementedError("FILL LabEpisode.close")


class LabEnvironment:
    def __init__(self, settings: dict[str, Any]) -> None:
        self.url, self.slots = settings["url"], settings["slots"]
        self.options = settings.get("options", {})

    def tools(self) -> list[dict[str, Any]]:
        # FILL: your server's tools as OpenAI function tools.
        raise NotImplementedError("FILL LabEnvironment.tools")

    def start(self, task_id: str) -> LabEpisode:
        # FILL: open an episode of task_id on your server.
        raise NotImplementedError("FILL LabEnvironment.start")
