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
4. ``rewards()`` holds ``reward`` in [0, 1] (the main metric, memo §0: r_strict),
   ``r_success`` in {0, 1} and every metric the protocol declares, in range (env.metrics),
   every value a float, the same on every read.
5. ``close()`` may be called twice; episodes of two tasks open at once do not share state:
   each one's rewards are its own, whatever the other did.
6. The same task id is the same task on every start: the same instruction, tools and
   observation of the same first call (the paired bootstrap pairs episodes by task id).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from skilleval.env.metrics import MetricContract
from skilleval.errors import InfrastructureError, OutageError
from skilleval.records.env import Environment, EpisodeHandle, StepResult
from skilleval.records.policy import ToolCall

# How to mend a broken rule, by the rule's number above.
FIXES = {
    1: "tools() must return a non-empty list of {'type': 'function', 'function': {'name', "
    "'parameters': {'type': 'object', ...}}}, unique names, the same list on every call",
    2: "start(task_id) must open an episode of that task with its instruction text; an "
    "unknown task id is a configuration error of the split, not an empty episode",
    3: "answer an unknown tool or unusable arguments with an observation that says so "
    "(the model's mistake), and return StepResult(observation: str, done: bool)",
    4: "rewards() must give 'reward' in [0, 1], 'r_success' 0.0 or 1.0 and every metric the "
    "protocol declares in its range (map a points scale onto [0, 1], or declare the range in "
    "the adapter's metrics attribute), finite floats, the same on every read",
    5: "close() must free the episode once and do nothing on a second call; keep each "
    "episode's state (its id, its grade) in the episode object, never in the adapter",
    6: "start(task_id) must open the same task each time: seed the server's task from the "
    "task id, never from a clock or a counter",
}


@dataclass(frozen=True)
class Violation:
    """One way an adapter breaks the contract: the rule's number above, and what it did."""

    rule: int
    text: str

    def __str__(self) -> str:
        return self.text

    @property
    def fix(self) -> str:
        return FIXES[self.rule]


def tool_violations(tools: Any) -> list[Violation]:
    if not isinstance(tools, list) or not tools:
        return [Violation(1, "tools() is not a non-empty list")]
    problems: list[Violation] = []
    names = []
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not function:
            problems.append(
                Violation(1, f"tool {i} is not {{'type': 'function', 'function': {{...}}}}")
            )
            continue
        names.append(function.get("name"))
        parameters = function.get("parameters")
        if not isinstance(parameters, dict) or parameters.get("type") != "object":
            problems.append(
                Violation(
                    1, f"tool {function.get('name')!r}: parameters is not a JSON-Schema object"
                )
            )
    if len(set(names)) != len(names) or not all(isinstance(n, str) and n for n in names):
        problems.append(Violation(1, f"tool names are not unique non-empty strings: {names}"))
    return problems


# Not a rule: an infrastructure failure (InfrastructureError) met while checking, which a
# run survives by abandoning the episode and restarting its task. Reported, never a breach.
TRANSIENT = 0


def transient(what: str, error: Exception) -> Violation:
    return Violation(
        TRANSIENT,
        f"{what} raised InfrastructureError: {error} (an infrastructure failure, not a breach: "
        "a run abandons such an episode and restarts its task)",
    )


def step_violations(episode: EpisodeHandle, call: ToolCall) -> list[Violation]:
    try:
        result = episode.step(call)
    except InfrastructureError as error:
        return [transient(f"step({call.name!r}, {call.arguments})", error)]
    except Exception as error:  # the contract: a model's mistake is an observation
        return [
            Violation(
                3, f"step({call.name!r}, {call.arguments}) raised {type(error).__name__}: {error}"
            )
        ]
    if not isinstance(result, StepResult) or not isinstance(result.observation, str):
        return [
            Violation(3, f"step({call.name!r}) did not return a StepResult with a text observation")
        ]
    if not isinstance(result.done, bool):
        return [Violation(3, f"step({call.name!r}) returned done={result.done!r}, not a bool")]
    return []


# How many fresh episodes a step that failed on infrastructure is tried again on, as a run
# restarts the episode, before the failure is taken as no passing fault.
STEP_RETRIES = 2


def retried_step(
    environment: Environment, task_id: str, call: ToolCall, first: Violation
) -> Violation:
    """A step that failed on infrastructure, tried again on fresh episodes of its task:
    ``first`` (transient) once a retry passes, the retry's breach if it breaks a rule, and
    a rule 3 breach when it fails on infrastructure every time."""
    for _ in range(STEP_RETRIES):
        try:
            episode = environment.start(task_id)
        except InfrastructureError:
            continue  # failing on infrastructure again, now at the start
        try:
            again = step_violations(episode, call)
        finally:
            episode.close()
        if not again:
            return Violation(TRANSIENT, f"{first}; it passed when tried again")
        if again[0].rule != TRANSIENT:
            return again[0]
    return Violation(
        3,
        f"{first}; the same on {STEP_RETRIES} fresh episodes, so no passing fault: a run "
        f"would abandon every episode of task {task_id}",
    )


def reward_violations(
    episode: EpisodeHandle, task_id: str, metrics: MetricContract
) -> tuple[list[Violation], dict[str, float] | None]:
    """Rule 4 on one episode's rewards, and the rewards read (None if unreadable)."""
    try:
        first, second = episode.rewards(), episode.rewards()
    except InfrastructureError as error:
        return [transient(f"task {task_id}: rewards()", error)], None
    except Exception as error:
        problem = f"task {task_id}: rewards() raised {type(error).__name__}: {error}"
        return [Violation(4, problem)], None
    problems = [Violation(4, f"task {task_id}: {p}") for p in metrics.violations(first)]
    if first != second:
        problems.append(Violation(4, f"task {task_id}: rewards() changed between two reads"))
    return problems, first


def schema_value(schema: Any) -> Any:
    """A value a JSON Schema accepts, as a model would fill it: the first enum value or
    example, else the simplest value of its type (objects with their required keys)."""
    if not isinstance(schema, dict):
        return "x"
    for listed in ("enum", "examples"):
        if isinstance(schema.get(listed), list) and schema[listed]:
            return schema[listed][0]
    if "default" in schema:
        return schema["default"]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    if kind == "object" or "properties" in schema:
        return schema_arguments(schema)
    simple = {"integer": schema.get("minimum", 1), "number": schema.get("minimum", 1.0)}
    simple |= {"boolean": True, "array": [], "null": None}
    return simple.get(str(kind), "x")


def schema_arguments(parameters: Any) -> dict[str, Any]:
    """Arguments for a tool from its parameters' JSON Schema: every property filled."""
    properties = parameters.get("properties") if isinstance(parameters, dict) else None
    if not isinstance(properties, dict):
        return {}
    return {name: schema_value(spec) for name, spec in properties.items()}


def probe_calls(tools: list[dict[str, Any]]) -> list[ToolCall]:
    """The calls env check steps each episode with, in order: every tool with arguments
    from its own schema, then with arguments missing and unusable, then an unknown tool."""
    functions = [tool["function"] for tool in tools]
    calls = [
        ToolCall(f"s{i}", f["name"], schema_arguments(f.get("parameters")))
        for i, f in enumerate(functions)
    ]
    calls += [ToolCall(f"c{i}", f["name"], {}) for i, f in enumerate(functions)]
    calls += [
        ToolCall(f"b{i}", f["name"], {"no_such_argument": [1, None]})
        for i, f in enumerate(functions)
    ]
    calls.append(ToolCall("unknown", "no_such_tool_in_any_environment", {"x": 1}))
    return calls


def start_violations(
    environment: Environment, task_id: str, metrics: MetricContract | None = None
) -> list[Violation]:
    """Rules 1 and 2, which every episode needs: a run checks them before it leases a card,
    and with ``metrics`` rule 4 on the rewards of the episode before its first step, where
    the adapter answers them. A raised error is a violation too (an adapter that cannot
    list its tools or open an episode would fail every task), except an outage, which is
    raised."""
    try:
        tools = environment.tools()
    except (InfrastructureError, OutageError):
        raise  # an absent or busy server is an outage, not a broken adapter
    except Exception as error:
        return [Violation(1, f"tools() raised {type(error).__name__}: {error}")]
    problems = tool_violations(tools)
    if problems:
        return problems
    try:
        episode = environment.start(task_id)
    except (InfrastructureError, OutageError):
        raise
    except Exception as error:
        return [Violation(2, f"start({task_id!r}) raised {type(error).__name__}: {error}")]
    try:
        if not isinstance(episode.instruction, str) or not episode.instruction.strip():
            problems.append(Violation(2, f"task {task_id}: the episode has no instruction"))
        elif metrics is not None:
            problems += unstepped_reward_violations(episode, task_id, metrics)
    finally:
        episode.close()
    return problems


def unstepped_reward_violations(
    episode: EpisodeHandle, task_id: str, metrics: MetricContract
) -> list[Violation]:
    """Rule 4 on an episode before its first step; an adapter that cannot score an episode
    yet is no violation (each episode is checked as it is recorded)."""
    try:
        rewards = episode.rewards()
    except (InfrastructureError, OutageError):
        raise
    except Exception:
        return []
    return [Violation(4, f"task {task_id}: {p}") for p in metrics.violations(rewards)]


def contract_violations(
    environment: Environment, task_ids: Sequence[str], metrics: MetricContract | None = None
) -> list[Violation]:
    """Every way ``environment`` breaks the contract above on these tasks (two at least,
    whose episodes are open at once); each violation carries its rule and fix. ``metrics``:
    the rewards the protocol declares (by default, the contract's own two)."""
    metrics = metrics or MetricContract.of("reward", [], "the adapter")
    problems = start_violations(environment, task_ids[0])
    if problems:
        return problems
    tools = environment.tools()
    if environment.tools() != tools:
        problems.append(Violation(1, "tools() gave another list on its second call"))
    calls = probe_calls(tools)
    episodes: list[tuple[str, EpisodeHandle]] = []
    together: dict[str, dict[str, float]] = {}
    try:
        for task_id in task_ids:
            try:
                episodes.append((task_id, environment.start(task_id)))
            except Exception as error:
                problems.append(
                    Violation(2, f"start({task_id!r}) raised {type(error).__name__}: {error}")
                )
        for task_id, episode in episodes:
            if not isinstance(episode.instruction, str) or not episode.instruction.strip():
                problems.append(Violation(2, f"task {task_id}: the episode has no instruction"))
            for call in calls:
                found = step_violations(episode, call)
                if found and found[0].rule == TRANSIENT:
                    found = [retried_step(environment, task_id, call, found[0])]
                problems += found
        for task_id, episode in episodes:  # every episode stepped before any is read
            found, rewards = reward_violations(episode, task_id, metrics)
            problems += found
            if rewards is not None:
                together[task_id] = rewards
        if len(episodes) >= 2 and episodes[0][1].instruction == episodes[1][1].instruction:
            problems.append(
                Violation(5, "two tasks' episodes have the same instruction: shared state?")
            )
    finally:
        for _, episode in episodes:
            problems += close_violations(episode)
    return problems + replay_violations(environment, task_ids[0], calls, together)


def presented(environment: Environment, task_id: str, calls: list[ToolCall]) -> tuple[Any, ...]:
    """What one episode of ``task_id`` shows when stepped alone with ``calls``: its
    instruction, the tools, each observation, and its rewards."""
    episode = environment.start(task_id)
    try:
        observations = []
        for call in calls:
            try:
                observations.append(episode.step(call).observation)
            except Exception as error:  # rule 3's, reported there
                observations.append(f"raised {type(error).__name__}")
        return episode.instruction, environment.tools(), observations, episode.rewards()
    finally:
        episode.close()


def replay_violations(
    environment: Environment,
    task_id: str,
    calls: list[ToolCall],
    together: dict[str, dict[str, float]],
) -> list[Violation]:
    """Rule 6: the task started twice alone, stepped alike, presents the same; rule 5: its
    rewards alone equal those it had beside another task's episode."""
    try:
        first, second = (presented(environment, task_id, calls) for _ in range(2))
    except (InfrastructureError, OutageError):
        raise
    except Exception as error:
        return [Violation(6, f"task {task_id} could not be replayed: {error}")]
    parts = ("instruction", "tools", "observations", "rewards")
    differing = [part for part, a, b in zip(parts, first, second, strict=True) if a != b]
    if differing:
        return [
            Violation(
                6,
                f"task {task_id} started twice and stepped alike presents another "
                f"{', '.join(differing)} (first instruction {str(first[0])[:60]!r}, then "
                f"{str(second[0])[:60]!r})",
            )
        ]
    beside = together.get(task_id)
    if beside is not None and beside != first[3]:
        return [
            Violation(
                5,
                f"task {task_id}: rewards {beside} while another task's episode was open, "
                f"{first[3]} alone: its rewards() reads another episode's state",
            )
        ]
    return []


def close_violations(episode: EpisodeHandle) -> list[Violation]:
    for attempt in ("first", "second"):
        try:
            episode.close()
        except Exception as error:
            return [
                Violation(
                    5, f"close() raised {type(error).__name__} on its {attempt} call: {error}"
                )
            ]
    return []
