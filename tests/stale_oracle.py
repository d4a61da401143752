"""The staleness oracle of tests/test_staleness*.py: what a dry run plans on a built
graph, checked against ``skilleval stale``, and what a build then computes."""

from __future__ import annotations

import datetime as dt
import json
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from skilleval.workflow.planned import read_plan_file
from tests.conftest import outputs_by_rule, skilleval_cli, snakemake

CONFIG = ("--configfile", "config/small.yaml")
MAIN = {"s0-gain", "internalisation", "internalisation-gap", "upper-bound", "final-vs-initial"}


def stale(
    workdir: Path, *args: str, configfiles: tuple[str, ...] = ("config/small.yaml",)
) -> dict[str, set[str]]:
    """Rule -> stale outputs, asserting that the dry run and skilleval stale agree."""
    return stale_and_costs(workdir, *args, configfiles=configfiles)[0]


def stale_and_costs(
    workdir: Path, *args: str, configfiles: tuple[str, ...] = ("config/small.yaml",)
) -> tuple[dict[str, set[str]], dict[str, str]]:
    """(rule -> stale outputs, run summary -> certain or conditional), asserting that the
    dry run and skilleval stale agree on the outputs."""
    targets = [a for a in args if not a.startswith("-")] or ["paper"]
    with tempfile.TemporaryDirectory(prefix="plan-") as scratch:
        plan_file = Path(scratch) / "plan.jsonl"
        done = skilleval_cli(
            workdir, "stale", "--json", "--plan-file", str(plan_file), "--root", str(workdir),
            *targets, "--configfile", *configfiles,
        )  # fmt: skip
        assert done.returncode in (0, 1), done.stderr
        jobs = outputs_by_rule(read_plan_file(plan_file))
    jobs.pop("paper", None)
    told: dict[str, set[str]] = {}
    costs: dict[str, str] = {}
    for job in json.loads(done.stdout):
        if job["rule"] != "paper":
            told.setdefault(job["rule"], set()).update(job["outputs"])
        if job["cost"]:
            summary = next(o for o in job["outputs"] if o.endswith("summary.json"))
            costs[summary] = job["cost"]["kind"]
    assert told == {rule: outputs for rule, outputs in jobs.items() if outputs}
    return jobs, costs


MODEL_RULES = ("eval_run", "gate_masked_run", "ablation_run")
# The sim trainer's jobs, one per benchmark (rules/ablation.smk): ablation_runs_<bench>.
SIM_JOBS = "ablation_runs_"
STAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
PROGRESS = re.compile(r"\] (\d+)/\d+ tasks .*?done, reused (\d+)")


def model_runs(jobs: dict[str, set[str]]) -> set[str]:
    """The summaries of the planned model and trainer runs."""
    rules = [r for r in jobs if r in MODEL_RULES or r.startswith(SIM_JOBS)]
    return {o for r in rules for o in jobs[r] if o.endswith("summary.json")}


def with_sim_jobs_as_one(jobs: dict[str, set[str]]) -> dict[str, set[str]]:
    """``jobs`` with the sim trainer's per-benchmark jobs merged under 'ablation_runs'."""
    merged: dict[str, set[str]] = {}
    for rule, outputs in jobs.items():
        merged.setdefault("ablation_runs" if rule.startswith(SIM_JOBS) else rule, set()).update(
            outputs
        )
    return merged


def build_and_count(
    workdir: Path, *configfiles: str, targets: Iterable[str] = ("paper",)
) -> dict[str, int]:
    """Build ``targets`` (the paper unless told); model run log -> episodes its job computed
    in this build: 0 for a job that restored its kept result."""
    started = dt.datetime.now() - dt.timedelta(seconds=1)
    snakemake(workdir, *targets, "-j", "2", "--configfile", *(configfiles or CONFIG[1:]))
    computed: dict[str, int] = {}
    for path in (workdir / "results" / "logs").rglob("*.log"):
        new = "\n".join(
            line
            for line in path.read_text().splitlines()
            if STAMP.match(line) and dt.datetime.fromisoformat(line[:19]) >= started
        )
        name = str(path.relative_to(workdir / "results" / "logs"))
        if "evidence unchanged" in new:
            computed[name] = 0
        elif progress := PROGRESS.findall(new):
            done, reused = progress[-1]
            computed[name] = int(done) - int(reused)
    return computed


@contextmanager
def edited(path: Path, change: Callable[[str], str]) -> Iterator[None]:
    original = path.read_bytes()
    text = original.decode()
    changed = change(text)
    assert changed != text, f"the edit of {path} changed nothing"
    path.write_text(changed)
    try:
        yield
    finally:
        path.write_bytes(original)


def stems(outputs: set[str]) -> set[str]:
    return {Path(o).stem for o in outputs}


RANKED = ("rank-top-4", "rank-bottom-4", "rank-random-4-20260907")
EVERY_RUN = 20  # 8 evaluation runs and 12 masked Gate A runs of the small world


def causes_by_cell(text: str) -> dict[str, list[str]]:
    """`skilleval stale`'s report read back: each cell with the causes of every job that
    changes it."""
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        cells, _, causes = line.partition(": ")
        for cell in cells.split("; ") if causes else []:
            found.setdefault(cell, []).extend(causes.split("; "))
    return found
