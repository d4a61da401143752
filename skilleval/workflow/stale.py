"""What is stale and why, in words: Snakemake's own dry run, explained.

There is one oracle: the stale outputs are exactly those of the jobs ``snakemake -n``
would run, with the same profile, config files and targets. This module runs that dry
run, decodes each job's reason (which code file, which config value, which input's
content changed) and names the paper cells the outputs feed: "Table main, s0-gain:
statistics.n_resamples 10000 -> 2000".

Each planned model or trainer run is priced as certain or conditional
(workflow.planned).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skilleval import paths
from skilleval.config.model import Config
from skilleval.errors import SkillevalError
from skilleval.skills.bank import bank_hash, load_bank
from skilleval.workflow.plan import WorkflowPlan
from skilleval.workflow.planned import KeptResults, RunCost, planned_jobs, run_cost
from skilleval.workflow.rule_inputs import SIM_TRAINER_JOB
from skilleval.workflow.snakemake_internals import params_change, reason_parts

REBUILT = "rebuilt after its inputs: "
NOT_BUILT = "not built yet (or removed/archived)"
IDENTITY = re.compile(r"[0-9a-f]{16}")
CHANGED_RUN = re.compile(r"ablation run (?P<run>\S+): evidence identity ")


@dataclass(frozen=True)
class StaleJob:
    rule: str
    outputs: tuple[str, ...]
    reasons: tuple[str, ...]
    cells: tuple[str, ...] = field(default=())
    cost: RunCost | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "outputs": list(self.outputs),
            "reasons": list(self.reasons),
            "cells": list(self.cells),
            "cost": self.cost.as_json() if self.cost else None,
        }


def _config_path(config: Mapping[str, Any], value: Mapping[str, Any], prefix: str = "") -> str:
    """Where in config a mapping with these keys lives (empty when nowhere)."""
    for key, item in config.items():
        if isinstance(item, Mapping):
            if set(item) == set(value):
                return f"{prefix}{key}"
            found = _config_path(item, value, f"{prefix}{key}.")
            if found:
                return found
    return ""


def _differences(old: Any, new: Any, path: str) -> Iterator[str]:
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for key in sorted(set(old) | set(new), key=str):
            yield from _differences(old.get(key), new.get(key), f"{path}.{key}".lstrip("."))
    elif old != new:
        yield f"{path or 'value'} {old!r} -> {new!r}"


def _is_code(value: Any) -> bool:
    return isinstance(value, Mapping) and any(str(k).endswith((".py", ".j2")) for k in value)


def _changed_runs(old: Mapping[str, str], new: Mapping[str, str]) -> list[str]:
    return [
        f"ablation run {run}: evidence identity {old.get(run)!r} -> {new.get(run)!r}"
        for run in sorted(set(old) | set(new))
        if old.get(run) != new.get(run)
    ]


def describe_params(
    before: list[Any], now: list[Any], config: Mapping[str, Any], rule: str = ""
) -> list[str]:
    """Phrases for the params that differ: code files, config values, input contents, and
    for the sim trainer's job, the runs whose identity changed."""
    phrases: list[str] = []
    unmatched_new = list(now)
    for old in before:
        new = next((n for n in unmatched_new if _same_kind(old, n)), None)
        if new is not None:
            unmatched_new.remove(new)
        if _is_code(old) or _is_code(new):
            old_code, new_code = old or {}, new or {}
            changed = sorted(
                f for f in set(old_code) | set(new_code) if old_code.get(f) != new_code.get(f)
            )
            phrases += [f"code: {f}" for f in changed]
        elif is_sim_trainer_job(rule) and isinstance(old or new, Mapping):
            phrases += _changed_runs(old or {}, new or {})
        elif isinstance(old, str) and isinstance(new, str) and IDENTITY.fullmatch(old):
            phrases.append("generated content changed (world generator)")
        elif isinstance(old, Mapping) and isinstance(new, Mapping):
            prefix = _config_path(config, new)
            phrases += list(_differences(old, new, prefix))
        else:
            phrases.append(f"a parameter changed: {old!r} -> {new!r}")
    phrases += [f"new parameter {n!r}" for n in unmatched_new]
    if not phrases and before == now:
        phrases.append("parameters recorded in another key order (no value changed)")
    return phrases


def _same_kind(old: Any, new: Any) -> bool:
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        return _is_code(old) == _is_code(new) and bool(set(old) & set(new))
    return type(old) is type(new)


def explain(
    reason: str, config: Mapping[str, Any], rule: str = "", outputs: Sequence[str] = ()
) -> list[str]:
    """Snakemake's reason for one job, in the project's words. A job with some of its
    ``outputs`` on disk is stale for what it lacks, not unbuilt."""
    phrases: list[str] = []
    for kind, detail, part in reason_parts(reason):
        change = params_change(detail) if kind == "params" else None
        if change is not None:
            phrases += describe_params(*change, config, rule)
        elif kind == "missing":
            missing = [f.strip() for f in detail.split(",") if f.strip()]
            if outputs and len(set(missing)) < len(set(outputs)):
                phrases.append(f"missing output: {', '.join(missing)}")
            else:
                phrases.append(NOT_BUILT)
        elif kind == "updated_by_job":
            phrases.append(f"{REBUILT}{detail}")
        elif kind == "updated_input":
            phrases.append(f"input changed: {detail}")
        elif kind == "forced":
            phrases.append("forced (-f/-R/--forcerun)")
        else:
            phrases.append(part)
    return phrases


def cells_of_output(output: str, plan: WorkflowPlan) -> list[str]:
    """The paper cells an output feeds, in words."""
    parts = Path(output).parts
    if parts[:2] == ("paper", "tables") or parts[:2] == ("paper", "figures"):
        kind = "Table" if parts[1] == "tables" else "Figure"
        return [f"{kind} {Path(output).stem}"]
    if parts[:2] == ("results", "runs"):
        return cells_of_run(plan, parts[2])
    if parts[:2] in (("results", "contrasts"), ("results", "verdicts")):
        contrast = plan.contrasts.get(Path(output).stem)
        return [f"Table {contrast.table}, {contrast.name}"] if contrast else []
    if output == paths.PAPER_NOTICE_TEXT:
        return ["Title page, simulation notice"]
    if parts[:2] == ("results", "paper") and Path(output).stem.startswith("verdict_family_"):
        table = Path(output).stem.removeprefix("verdict_family_")
        return [f"Table {table}, p_Holm of every causal verdict"]
    if parts[:2] in (("results", "gate"), ("results", "banks")):
        return ["Table ranking, every arm (gate betas)"]
    if parts[:2] == ("results", "ablation") and len(parts) > 3 and parts[2] != "splits":
        return [f"Table ablation_{parts[2]}, {parts[3]}"]
    return []


def cells_of_run(plan: WorkflowPlan, run: str) -> list[str]:
    cells = [f"Table main, {run}"] if run in plan.main_runs else []
    for name, spec in plan.contrasts.items():
        if run in (spec.control, spec.treatment) and spec.table != "extra":
            cells.append(f"Table {spec.table}, {name}")
    if run in {arm.run for arm in plan.paper_arms}:
        cells.append(f"Table ranking, {run}")
    if run == plan.ranking.bare_val_run:
        cells.append("Table ranking, every arm (gate betas)")
    return cells


def stale_jobs(
    config: Config,
    root: Path,
    configfiles: Sequence[str],
    targets: Sequence[str],
    profile: str | None = None,
    keep_plan: Path | None = None,
) -> list[StaleJob]:
    plan, written = WorkflowPlan(config), config.settings()
    planned = [j for j in planned_jobs(root, configfiles, targets, profile, keep_plan) if j.outputs]
    parsed = [
        (
            j.rule,
            j.outputs,
            with_chunks(explain(j.reason, written, j.rule, j.outputs), j.outputs, root),
        )
        for j in planned
    ]
    causes = root_causes(parsed)
    kept = KeptResults(config, plan, root)
    return [
        StaleJob(
            job.rule,
            tuple(job.outputs),
            tuple(causes[i]),
            tuple(
                sorted(
                    {
                        c
                        for o in changing(job.outputs, parsed[i][2])
                        for c in cells_of_output(o, plan)
                    }
                )
            ),
            run_cost(job, root, kept),
        )
        for i, job in enumerate(planned)
    ]


def changing(outputs: Sequence[str], reasons: Sequence[str]) -> list[str]:
    """The outputs that can change: when the only reasons are changed run identities (the
    sim trainer's one job), those runs' outputs; the job restores the others unchanged."""
    runs = {m["run"] for r in reasons if (m := CHANGED_RUN.match(r))}
    if not reasons or len(runs) < len(reasons):
        return list(outputs)
    return [o for o in outputs if runs & set(Path(o).parts) or Path(o).stem in runs]


def with_chunks(phrases: list[str], outputs: Sequence[str], root: Path) -> list[str]:
    """Name the chunks behind "input changed: <bank>" of a run, from its summary's record
    of every injected chunk's hash."""
    summary_path = next((root / o for o in outputs if o.endswith(paths.SUMMARY_FILE)), None)
    if summary_path is None or not summary_path.exists():
        return phrases
    before = json.loads(summary_path.read_text()).get("chunk_hashes") or {}
    named = []
    for phrase in phrases:
        bank = root / phrase.removeprefix("input changed: ")
        if phrase.startswith("input changed: ") and before and bank.suffix == ".md":
            try:
                now = {s.chunk_id: bank_hash([s])[:16] for s in load_bank(bank)}
            except SkillevalError:  # a malformed bank: the run itself will say so
                now = {}
            changed = sorted(c for c in set(now) | set(before) if now.get(c) != before.get(c))
            if changed:
                phrase += f" (chunks {', '.join(changed)})"
        named.append(phrase)
    return named


def root_causes(jobs: Sequence[tuple[str, list[str], list[str]]]) -> list[list[str]]:
    """Each job's own reasons, with "rebuilt after its inputs" replaced by the reasons of
    the jobs that rebuild those inputs, so every line names the edit behind it."""
    producer = {output: i for i, (_, outputs, _) in enumerate(jobs) for output in outputs}
    resolved: dict[int, list[str]] = {}

    def resolve(index: int, seen: frozenset[int]) -> list[str]:
        if index in resolved:
            return resolved[index]
        reasons: list[str] = []
        for phrase in jobs[index][2]:
            if not phrase.startswith(REBUILT):
                reasons.append(phrase)
                continue
            for file in phrase.removeprefix(REBUILT).split(", "):
                upstream = producer.get(file.strip())
                if upstream is not None and upstream not in seen:
                    # What made the input stale; an input that is only missing is named
                    # as such (this job's own outputs may well be built).
                    deeper = [r for r in resolve(upstream, seen | {upstream}) if r != NOT_BUILT]
                    reasons += deeper or [f"its input {file.strip()} is not built yet"]
        resolved[index] = list(dict.fromkeys(reasons)) or list(jobs[index][2])
        return resolved[index]

    return [resolve(i, frozenset({i})) for i in range(len(jobs))]


def report(jobs: list[StaleJob]) -> str:
    """One line per job: the paper cells it changes (its outputs where it changes none),
    then its causes; jobs that change the same cells share a line, each cause said once."""
    if not jobs:
        return "Nothing is stale: every paper number is built from the current inputs."
    causes: dict[str, list[str]] = {}
    for job in jobs:
        cells = list(dict.fromkeys(job.cells)) or [f"(no paper cell) {', '.join(job.outputs)}"]
        causes.setdefault("; ".join(cells), []).extend(job.reasons or ["stale"])
    lines = [f"{cells}: {'; '.join(dict.fromkeys(why))}" for cells, why in causes.items()]
    outputs = sum(len(j.outputs) for j in jobs)
    return (
        "\n".join(sorted(lines))
        + f"\n{len(jobs)} stale job(s), {outputs} output(s)."
        + cost_report(jobs)
    )


def cost_report(jobs: list[StaleJob]) -> str:
    """The planned model and trainer runs with their expected price, certain ones first."""
    priced = [j for j in jobs if j.cost is not None]
    sim = [sim_trainer_line(j) for j in jobs if is_sim_trainer_job(j.rule)]
    if not priced:
        return "\n" + "\n".join(sim or ["No model or trainer run is planned."])
    lines = ["", *sim, f"Model and trainer runs planned: {len(priced)}"]
    for certain in (True, False):
        group = [j for j in priced if j.cost is not None and j.cost.certain == certain]
        if not group:
            continue
        known = [j.cost.card_hours for j in group if j.cost and j.cost.card_hours is not None]
        walls = [j.cost.last_wall_s for j in group if j.cost and j.cost.last_wall_s is not None]
        kind = "certain" if certain else "conditional (free if upstream output is identical)"
        lines.append(
            f"  {kind}: {len(group)} run(s), {sum(known):.2f} card-hours, "
            f"{sum(walls) / 3600:.2f} h of run time"
            + (
                f"; {len(group) - len(known)} with no earlier duration"
                if len(known) < len(group)
                else ""
            )
        )
        for job in sorted(group, key=lambda j: j.outputs):
            cost = job.cost
            assert cost is not None
            price = (
                f"{cost.cards} card(s) x {cost.last_wall_s / 3600:.3f} h = "
                f"{cost.card_hours:.3f} card-hours"
                if cost.last_wall_s is not None and cost.card_hours is not None
                else f"{cost.cards} card(s), no earlier duration recorded"
            )
            summary = next(
                (o for o in job.outputs if o.endswith(paths.SUMMARY_FILE)), job.outputs[0]
            )
            lines.append(f"    {job.rule} {summary}: {price}")
    return "\n".join(lines)


def is_sim_trainer_job(rule: str) -> bool:
    """One benchmark's sim trainer job: ablation_runs_<bench> (rules/ablation.smk)."""
    return rule.startswith(f"{SIM_TRAINER_JOB}_")


def sim_trainer_line(job: StaleJob) -> str:
    """What one benchmark's sim trainer job will do: it costs no card, and trains only the
    runs whose identity has no kept result."""
    bench = job.rule.removeprefix(f"{SIM_TRAINER_JOB}_")
    total = sum(o.endswith(paths.SUMMARY_FILE) for o in job.outputs)
    runs = {m["run"] for r in job.reasons if (m := CHANGED_RUN.match(r))}
    if runs and len(runs) == len(job.reasons):
        return (
            f"Sim trainer job ({bench}): {len(runs)} of {total} ablation runs train (identity "
            "changed); it restores the others; no card."
        )
    return (
        f"Sim trainer job ({bench}): {total} ablation runs, each restored if kept, else "
        "trained; no card."
    )
