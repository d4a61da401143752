"""The contract every environment adapter keeps with the rollout loop, as a check.

An adapter (the built-in shopsim, the HTTP client of ``skilleval/env/wire.py``, or one
written for another environment server) passes when ``contract_violations`` returns
nothing for a few of its tasks:

1. ``tools()`` lists OpenAI function tools: ``{"type": "function", "function": {"name",
   "parameters"}}``, names unique, parameters a JSON-Schema object; the same list each call.
2. ``start(task_id)`` opens an episode whose ``instruction`` is non-empty text.
3. ``step`` answers every call with a ``StepResult`` (text observation, bool done): a tool
   the environment does not know, or arguments it cannot use, are the model's mistakes,
   answered in the observation, never raised.
4. ``rewards()`` holds ``reward`` in [0, 1] (the main metric, memo §0: r_strict) and
   ``r_success`` in {0, 1}, every value a float, the same on every read.
5. ``close()`` may be called twice; episodes of two tasks open at once do not share state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from skilleval.records.env import Environment, EpisodeHandle, StepResult
from skilleval.records.policy import ToolCall


def tool_violations(tools: Any) -> list[str]:
    if not isinstance(tools, list) or not tools:
        return ["tools() is not a non-empty list"]
    problems = []
    names = []
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not function:
            problems.append(f"tool {i} is not {{'type': 'function', 'function': {{...}}}}")
            continue
        names.append(function.get("name"))
        parameters = function.get("parameters")
        if not isinstance(parameters, dict) or parameters.get("type") != "object":
            problems.append(
                f"tool {function.get('name')!r}: parameters is not a JSON-Schema object"
            )
    if len(set(names)) != len(names) or not all(isinstance(n, str) and n for n in names):
        problems.append(f"tool names are not unique non-empty strings: {names}")
    return problems


def step_violations(episode: EpisodeHandle, call: ToolCall) -> list[str]:
    try:
        result = episode.step(call)
    except Exception as error:  # the contract: a model's mistake is an observation
        return [f"step({call.name!r}, {call.arguments}) raised {type(error).__name__}: {error}"]
    if not isinstance(result, StepResult) or not isinstance(result.observation, str):
        return [f"step({call.name!r}) did not return a StepResult with a text observation"]
    if not isinstance(result.done, bool):
        return [f"step({call.name!r}) returned done={result.done!r}, not a bool"]
    return []


def reward_violations(episode: EpisodeHandle, task_id: str) -> list[str]:
    first, second = episode.rewards(), episode.rewards()
    problems = []
    if first != second:
        problems.append(f"task {task_id}: rewards() changed between two reads")
    if not all(isinstance(v, float) and math.isfinite(v) for v in first.values()):
        problems.append(f"task {task_id}: rewards are not all finite floats: {first}")
    if not 0.0 <= first.get("reward", -1.0) <= 1.0:
        problems.append(f"task {task_id}: reward {first.get('reward')!r} is not in [0, 1]")
    if first.get("r_success") not in (0.0, 1.0):
        problems.append(f"task {task_id}: r_success {first.get('r_success')!r} is not 0 or 1")
    return problems


def contract_violations(environment: Environment, task_ids: Sequence[str]) -> list[str]:
    """Every way ``environment`` breaks the contract above on these tasks (two at least)."""
    tools = environment.tools()
    problems = tool_violations(tools)
    if environment.tools() != tools:
        problems.append("tools() gave another list on its second call")
    if problems:
        return problems
    episodes = [environment.start(task_id) for task_id in task_ids]
    try:
        for task_id, episode in zip(task_ids, episodes, strict=True):
            if not isinstance(episode.instruction, str) or not episode.instruction.strip():
                problems.append(f"task {task_id}: the episode has no instruction")
            calls = [ToolCall(f"c{i}", t["function"]["name"], {}) for i, t in enumerate(tools)]
            calls.append(ToolCall("unknown", "no_such_tool_in_any_environment", {"x": 1}))
            for call in calls:
                problems += step_violations(episode, call)
            problems += reward_violations(episode, task_id)
        if len(episodes) >= 2 and episodes[0].instruction == episodes[1].instruction:
            problems.append("two tasks' episodes have the same instruction: shared state?")
    finally:
        for episode in episodes:
            episode.close()
            episode.close()
    return problems
