"""The scripted policy of the default world.

It reads the conversation the way a model would: the task from the user message, skill
hints from the system prompt, search and view results from tool messages. Its
"weights" are per-decision logits in a safetensors checkpoint; skill hints shift those
logits (scaled by the checkpoint's receptivity, so effects shrink on a stronger model);
temperature divides the logits, so higher temperature means noisier decisions.

Each episode draws its decisions from a hash of (run salt, instruction, decision), so a
resumed or reordered run gives identical per-task results.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from skilleval.errors import InfrastructureError
from skilleval.records.policy import AssistantTurn, Message, ToolCall
from skilleval.skills.bank import parse_hints
from skilleval.world.shopsim import CATEGORY_NAMES

# Bump whenever the scripted behaviour changes: it is part of every sim run's fingerprint.
SIM_POLICY_VERSION = 3
DECISIONS = ("read_category", "price_filter", "inspect", "verbosity")
OUTCOME_DECISIONS = DECISIONS[:3]
INSTRUCTION = re.compile(
    r"Buy exactly one (?P<category>.+?) that costs at most \$(?P<budget>[0-9.]+) "
    r"and has all of these features: (?P<features>.+)\.$"
)
Decider = Callable[[str], bool]


@dataclass(frozen=True)
class ParsedTask:
    category: str
    budget: float
    features: tuple[str, ...]


def weights_salt(tensors: Mapping[str, np.ndarray]) -> str:
    """Run-level noise key from the policy's weights themselves (not the file's bytes)."""
    digest = hashlib.sha256()
    for key in sorted(k for k in tensors if k.startswith("policy.")):
        digest.update(key.encode())
        digest.update(np.ascontiguousarray(tensors[key], dtype=np.float32).tobytes())
    return digest.hexdigest()[:16]


def parse_instruction(text: str) -> ParsedTask:
    match = INSTRUCTION.search(text)
    if match is None:
        raise ValueError(f"sim policy cannot read the task: {text[:80]!r}")
    return ParsedTask(
        category=match.group("category"),
        budget=float(match.group("budget")),
        features=tuple(f.strip() for f in match.group("features").split(",")),
    )


def hint_shifts(hints: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    shifts = dict.fromkeys(DECISIONS, 0.0)
    for hint in hints:
        if hint.get("decision") in shifts:
            shifts[hint["decision"]] += float(hint.get("shift", 0.0))
    return shifts


# A checkpoint's reaction to a skills section as such, whatever its chunks say (written
# only by a world with world.skills_section_shift set).
SECTION_SHIFT = "policy.skills_section_shift"


def section_shift_of(tensors: Mapping[str, np.ndarray]) -> float:
    if SECTION_SHIFT not in tensors:
        return 0.0
    return float(np.asarray(tensors[SECTION_SHIFT]).reshape(-1)[0])


def with_section(shifts: Mapping[str, float], section_shift: float) -> dict[str, float]:
    """``shifts`` plus the common shift a skills section gives every outcome decision."""
    return {d: v + (section_shift if d in OUTCOME_DECISIONS else 0.0) for d, v in shifts.items()}


def skill_shifts(hints: Sequence[Mapping[str, Any]], section_shift: float) -> dict[str, float]:
    """The chunks' hint shifts, plus the section's common shift when the prompt has a
    skills section (the world marks each of its chunks with a hint, so a prompt with
    hints is a prompt with a skills section)."""
    shifts = hint_shifts(hints)
    return with_section(shifts, section_shift) if hints and section_shift else shifts


def decision_probabilities(
    logits: np.ndarray, receptivity: float, shifts: Mapping[str, float], temperature: float
) -> dict[str, float]:
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 for the sim policy, got {temperature}")
    return {
        name: 1.0 / (1.0 + math.exp(-(float(logits[i]) + receptivity * shifts[name]) / temperature))
        for i, name in enumerate(DECISIONS)
    }


def uniform(*key: object) -> float:
    digest = hashlib.sha256("\x1f".join(map(str, key)).encode()).digest()
    return (int.from_bytes(digest[:8], "big") + 0.5) / 2.0**64


# Share of a decision's randomness that belongs to the task rather than the run: real
# models find the same tasks hard, which is what makes paired contrasts informative.
TASK_CORRELATION = 0.9
_NORMAL = NormalDist()


def correlated_uniform(task_seed: int, salt: str, instruction: str, decision: str) -> float:
    """Uniform draw shared in part by every run of one runtime seed on the same task.

    A Gaussian copula: marginally uniform, so decision probabilities are unchanged. Both
    parts are redrawn by a new runtime seed: over seeds every decision is a fresh
    Bernoulli(p), which is what the world's ground truth takes the expectation over. (A
    run part keyed by weights and prompt alone stayed fixed across seeds, so re-running
    with a new seed did not redraw it and contrasts were biased against the truth.)
    """
    task_part = _NORMAL.inv_cdf(uniform("task", task_seed, instruction, decision))
    run_part = _NORMAL.inv_cdf(uniform(salt, task_seed, instruction, decision))
    mixed = TASK_CORRELATION * task_part + math.sqrt(1 - TASK_CORRELATION**2) * run_part
    return _NORMAL.cdf(mixed)


def confused_category(category: str) -> str:
    """The category a model that misreads the request searches for instead."""
    index = CATEGORY_NAMES.index(category) if category in CATEGORY_NAMES else 0
    return CATEGORY_NAMES[(index + 1) % len(CATEGORY_NAMES)]


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def prompt_tokens(messages: list[Message], tools: list[dict[str, Any]]) -> int:
    """The prompt a served model is given: the conversation and every tool's schema."""
    return _tokens(json.dumps(messages)) + _tokens(json.dumps(tools))


class SimPolicy:
    """Scripted policy; ``decider`` overrides the random decisions (ground-truth tables)."""

    def __init__(
        self,
        tensors: Mapping[str, np.ndarray],
        temperature: float,
        max_tokens: int,
        enable_thinking: bool,
        salt: str,
        task_seed: int = 0,
        decider: Callable[[str, ParsedTask], Decider] | None = None,
        fault_rate: float = 0.0,
    ) -> None:
        self.logits = np.asarray(tensors["policy.decision_logits"], dtype=np.float64)
        self.receptivity = float(np.asarray(tensors["policy.skill_receptivity"]).reshape(-1)[0])
        self.section_shift = section_shift_of(tensors)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.enable_thinking = enable_thinking
        self.salt = salt
        self.task_seed = task_seed
        self.decider = decider
        self.fault_rate = fault_rate
        # Faults model a flaky server that rejects an episode's first request; they are
        # deliberately not reproducible per task.
        self._fault_rng = random.Random()

    def _decider(self, system: str, instruction: str, task: ParsedTask) -> Decider:
        if self.decider is not None:
            return self.decider(instruction, task)
        shifts = skill_shifts(parse_hints(system), self.section_shift)
        probs = decision_probabilities(self.logits, self.receptivity, shifts, self.temperature)
        # The run-level noise depends only on what a served model would see too (its
        # weights, the system prompt), so in-process and HTTP runs decide identically.
        salt = f"{self.salt}|{hashlib.sha256(system.encode()).hexdigest()[:16]}"
        return lambda name: (
            correlated_uniform(self.task_seed, salt, instruction, name) < probs[name]
        )

    def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> AssistantTurn:
        first_turn = not any(m["role"] == "assistant" for m in messages)
        if first_turn and self.fault_rate and self._fault_rng.random() < self.fault_rate:
            raise InfrastructureError("injected fault: HTTP 503 from sim model server")
        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        instruction = next(m["content"] for m in messages if m["role"] == "user")
        task = parse_instruction(instruction)
        decide = self._decider(system, instruction, task)
        call, thought = self._next_action(messages, task, decide)
        repeats = 1 + int(3 * decide("verbosity"))
        reasoning = " ".join([thought] * repeats) if self.enable_thinking else None
        tool_calls = () if call is None else (call,)
        content = "" if call else "I could not find a product that satisfies the request."
        completion = _tokens(
            (reasoning or "") + content + json.dumps(call.arguments if call else {})
        )
        prompt = prompt_tokens(messages, tools)
        if completion > self.max_tokens:
            return AssistantTurn("", None, (), prompt, self.max_tokens, "length")
        finish = "tool_calls" if call else "stop"
        return AssistantTurn(content, reasoning, tool_calls, prompt, completion, finish)

    def _next_action(
        self, messages: list[Message], task: ParsedTask, decide: Decider
    ) -> tuple[ToolCall | None, str]:
        results: list[dict[str, Any]] | None = None
        viewed: list[dict[str, Any]] = []
        for message in messages:
            if message["role"] != "tool":
                continue
            payload = json.loads(message["content"])
            if isinstance(payload, list):
                results = payload
            elif isinstance(payload, dict) and "attributes" in payload:
                viewed.append(payload)
        step = sum(m["role"] == "assistant" for m in messages)
        if results is None:
            category = (
                task.category if decide("read_category") else confused_category(task.category)
            )
            max_price = task.budget if decide("price_filter") else None
            args = {"category": category, "max_price": max_price}
            return ToolCall(f"call-{step}", "search", args), f"I should search for {category}."
        if not results:
            return None, "The search returned nothing."
        if not decide("inspect"):
            return self._buy(step, results[0]["id"]), "The top result looks fine."
        if viewed and self._satisfies(viewed[-1], task):
            return self._buy(step, viewed[-1]["id"]), "This one meets every requirement."
        seen = {v["id"] for v in viewed}
        remaining = [r for r in results if r["id"] not in seen]
        if remaining:
            args = {"product_id": remaining[0]["id"]}
            return ToolCall(f"call-{step}", "view", args), "Let me check its features."
        return self._buy(step, results[0]["id"]), "Nothing matched; I take the top result."

    @staticmethod
    def _buy(step: int, product_id: str) -> ToolCall:
        return ToolCall(f"call-{step}", "buy", {"product_id": product_id})

    @staticmethod
    def _satisfies(product: Mapping[str, Any], task: ParsedTask) -> bool:
        return float(product["price"]) <= task.budget and set(task.features) <= set(
            product["attributes"]
        )
