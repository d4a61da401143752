"""The time a build has left, from the durations of the jobs it has finished.

Each rule's remaining jobs are expected to take as long as its finished ones on average;
a rule with none finished yet as long as its jobs took when they were last recorded (a
model run's summary keeps its wall time), else the mean of all finished jobs; and the build
to keep the parallelism it has shown so far: busy job-seconds per second of wall time.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean

from skilleval.provenance.durations import last_wall_s


@dataclass
class TimeLeft:
    planned: dict[str, int] = field(default_factory=dict)
    durations: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    started_at: float | None = None
    # Rule -> the mean duration its jobs took in earlier builds, as recorded.
    recorded: dict[str, float] = field(default_factory=dict)

    def plan(self, jobs_by_rule: dict[str, int]) -> None:
        """The jobs of the run, by rule (Snakemake's job stats, without their total)."""
        self.planned = {rule: n for rule, n in jobs_by_rule.items() if rule != "total"}

    def job_started(self, at: float) -> None:
        if self.started_at is None or at < self.started_at:
            self.started_at = at

    def job_finished(self, rule: str, seconds: float) -> None:
        self.durations[rule].append(max(seconds, 0.0))

    def seconds(self, now: float) -> float | None:
        """Expected seconds until every planned job is done; None before any job finished."""
        finished = [s for runs in self.durations.values() for s in runs]
        if not finished or self.started_at is None:
            return None
        overall = fmean(finished)
        work_left = sum(
            max(n - len(self.durations.get(rule, [])), 0)
            * (
                fmean(self.durations[rule])
                if self.durations.get(rule)
                else self.recorded.get(rule, overall)
            )
            for rule, n in self.planned.items()
        )
        wall = max(now - self.started_at, 1e-6)
        parallelism = max(sum(finished) / wall, 1e-3)
        return work_left / parallelism


def spoken(seconds: float | None) -> str:
    """``about 2 min left``; ``time left unknown`` before a job finished."""
    if seconds is None:
        return "time left unknown"
    if seconds < 1:
        return "nearly done"
    if seconds < 90:
        return f"about {seconds:.0f} s left"
    if seconds < 90 * 60:
        return f"about {seconds / 60:.0f} min left"
    return f"about {seconds / 3600:.1f} h left"


def recorded_durations(root: Path, rule_summaries: dict[str, str]) -> dict[str, float]:
    """Rule -> mean wall time its jobs recorded in the summaries matching each glob (the
    summaries of the last build, and the kept copies of complete runs)."""
    found = {}
    for rule, pattern in rule_summaries.items():
        walls = [w for path in root.glob(pattern) if (w := last_wall_s(path)) is not None]
        if walls:
            found[rule] = fmean(walls)
    return found
