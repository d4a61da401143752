"""The rewards an episode must hold, checked as each episode is recorded (rule 4 of
``skilleval/env/contract.py``).

The protocol declares its metrics (``metrics.main`` and ``metrics.auxiliary``); every
episode's rewards hold each of them, plus ``reward`` and ``r_success``, as finite floats in
range: [0, 1] unless the adapter declares another range for an auxiliary metric, and
``r_success`` 0 or 1. An adapter declares what it gives with a class attribute
``metrics = {"r_points": (0, 100), ...}`` (name -> (low, high)); a protocol naming a metric
that a declaring adapter does not give is refused before any card is leased.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from skilleval.errors import ContractBreach
from skilleval.protocol.sections import Metrics
from skilleval.records.runs import METRIC_NAME

UNIT_RANGE = (0.0, 1.0)
# What the contract fixes whatever an adapter declares: the main metric is a share, and
# success is a yes or no.
FIXED = {"reward": UNIT_RANGE, "r_success": UNIT_RANGE}
BINARY = frozenset({"r_success"})
RULE = "rule 4 of skilleval/env/contract.py"


def declared_metrics(environment: Any) -> dict[str, tuple[float, float]] | None:
    """The metrics an adapter says it gives (its ``metrics`` attribute), or None."""
    declared = getattr(environment, "metrics", None)
    if declared is None:
        return None
    if not isinstance(declared, Mapping):
        raise ContractBreach(
            f"the adapter's metrics attribute is {declared!r}, not a mapping of name -> "
            f"(low, high); fix: declare metrics = {{'r_name': (0.0, 1.0), ...}} ({RULE})"
        )
    ranges: dict[str, tuple[float, float]] = {}
    for name, bounds in declared.items():
        try:
            low, high = (float(b) for b in bounds)
        except (TypeError, ValueError):
            raise ContractBreach(
                f"the adapter declares metric {name!r} with range {bounds!r}, not (low, high); "
                f"fix: metrics = {{{name!r}: (0.0, 1.0)}} ({RULE})"
            ) from None
        ranges[str(name)] = (low, high)
    return ranges


@dataclass(frozen=True)
class MetricContract:
    """The metrics each episode of a run must hold, and their ranges. ``adapter`` names
    the environment adapter in every message."""

    names: tuple[str, ...]
    ranges: Mapping[str, tuple[float, float]]
    adapter: str

    @classmethod
    def of(
        cls,
        main: str,
        auxiliary: list[str],
        adapter: str,
        declared: Mapping[str, tuple[float, float]] | None = None,
    ) -> MetricContract:
        names = tuple(dict.fromkeys(["reward", "r_success", main, *auxiliary]))
        ranges = {name: (declared or {}).get(name, UNIT_RANGE) for name in names}
        ranges.update({name: FIXED[name] for name in names if name in FIXED})
        return cls(names, ranges, adapter)

    @classmethod
    def of_protocol(cls, metrics: Metrics, adapter: str, environment: Any = None) -> MetricContract:
        """The contract of a protocol's ``metrics`` section, with the ranges ``environment``
        (an adapter instance) declares."""
        declared = declared_metrics(environment) if environment is not None else None
        return cls.of(metrics.main, list(metrics.auxiliary), adapter, declared)

    def undeclared(self, environment: Any) -> list[str]:
        """The protocol's metrics that ``environment`` declares it does not give; none when
        it declares nothing (then each episode is checked as it is recorded)."""
        declared = declared_metrics(environment)
        return [] if declared is None else [n for n in self.names if n not in declared]

    def violations(self, rewards: Any) -> list[str]:
        """What is wrong with one episode's rewards, each naming key and value."""
        if not isinstance(rewards, Mapping):
            return [f"rewards() returned {type(rewards).__name__} {rewards!r}, not a mapping"]
        problems = [
            f"{name} is missing (the protocol declares it; the episode gave {sorted(rewards)})"
            for name in self.names
            if name not in rewards
        ]
        for name, value in rewards.items():
            if not isinstance(name, str) or not METRIC_NAME.match(name):
                problems.append(f"key {name!r} = {value!r} is no metric name (reward or r_*)")
                continue
            if isinstance(value, bool) or not isinstance(value, float) or not math.isfinite(value):
                problems.append(f"{name} = {value!r} is not a finite float")
                continue
            low, high = self.ranges.get(name, UNIT_RANGE)
            if name in BINARY and value not in (0.0, 1.0):
                problems.append(f"{name} = {value!r} is not 0 or 1")
            elif not low <= value <= high:
                problems.append(f"{name} = {value!r} is outside [{low:g}, {high:g}]")
        return problems

    def check(self, task_id: str, rewards: Any) -> None:
        """Stop the run at an episode whose rewards break the contract: one line naming the
        adapter, the task, the key and the value."""
        problems = self.violations(rewards)
        if problems:
            raise ContractBreach(
                f"the environment adapter {self.adapter} gave task {task_id} rewards that "
                f"break {RULE}: {'; '.join(problems)}. The episode is not recorded; fix the "
                "adapter's rewards() (or declare the metric's range in its metrics attribute) "
                "and re-run, which resumes from the kept episodes"
            )
