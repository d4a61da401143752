"""What a dry run plans: its jobs as Snakemake reports them to its logger plugin, and what
each planned model or trainer run is expected to cost.

A planned run is conditional when a complete result of its current evidence identity is
kept (provenance.evidence): it is planned because an upstream job re-runs, and if that
job's output comes out identical the run restores its kept result and costs nothing.
Otherwise it is certain: its own inputs, settings or code changed, or it was never
built. Its price is its cards (the dry run's gpu resource) times the wall time its last
summary recorded.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from skilleval import paths
from skilleval.ablation.matrix import load_matrix
from skilleval.config.model import Config
from skilleval.errors import SkillevalError
from skilleval.provenance.code import SourceCache
from skilleval.provenance.digests import FileDigests
from skilleval.provenance.durations import last_wall_s
from skilleval.provenance.evidence import model_run_code, trainer_run_code
from skilleval.runs.journal import archive_root
from skilleval.runs.resolve import resolve
from skilleval.workflow.plan import WorkflowPlan
from skilleval.workflow.rule_inputs import AblationInputs

# Rules whose jobs cost model-server or trainer time.
PRICED_RULES = ("eval_run", "gate_masked_run", "ablation_run")


@dataclass(frozen=True)
class RunCost:
    """What a planned model or trainer run is expected to cost."""

    certain: bool
    cards: int
    last_wall_s: float | None

    @property
    def card_hours(self) -> float | None:
        if self.last_wall_s is None:
            return None
        return self.cards * self.last_wall_s / 3600

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": "certain" if self.certain else "conditional",
            "cards": self.cards,
            "last_wall_s": self.last_wall_s,
            "card_hours": self.card_hours,
        }


def planned_jobs(
    root: Path,
    configfiles: Sequence[str],
    targets: Sequence[str],
    profile: str | None = None,
    keep_plan: Path | None = None,
    options: Sequence[str] = (),
) -> list[PlannedJob]:
    """The jobs ``snakemake -n`` plans in ``root``, as a user would run it with ``options``
    besides; its plan file is kept at ``keep_plan`` when given."""
    with tempfile.TemporaryDirectory(prefix="skilleval-plan-") as scratch:
        plan_file = keep_plan.resolve() if keep_plan else Path(scratch) / "plan.jsonl"
        plan_file.unlink(missing_ok=True)
        # Targets and options first: --configfile takes every word after it up to a flag.
        command = [sys.executable, "-m", "snakemake", *targets, *options, "-n"]
        command += ["--directory", str(root)]
        if profile:
            command += ["--profile", profile]
        command += plan_options(plan_file)
        if configfiles:
            command += ["--configfile", *configfiles]
        done = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise SkillevalError(
                f"snakemake -n failed in {root}:\n{(done.stderr or done.stdout)[-3000:]}"
            )
        return read_plan_file(plan_file)


def plan_options(plan_file: Path) -> list[str]:
    """Options that make a dry run write its plan to ``plan_file``: the structured JOB_INFO
    and RUN_INFO events it hands its logger plugin (``--logger skilleval``)."""
    return ["--logger", "skilleval", "--logger-skilleval-plan-file", str(plan_file)]


@dataclass(frozen=True)
class PlannedJob:
    """One job of a dry run: its rule, outputs, Snakemake's reason, its resources, its
    wildcards and its priority."""

    rule: str
    outputs: list[str]
    reason: str
    resources: dict[str, str]
    wildcards: dict[str, str]
    priority: str


def read_plan_file(plan_file: Path) -> list[PlannedJob]:
    """The jobs of a plan file, checked against the dry run's own count of them: a
    Snakemake release that stopped reporting jobs to logger plugins fails here, loudly,
    instead of planning nothing. No file: the dry run planned nothing."""
    text = plan_file.read_text() if plan_file.exists() else ""
    lines: list[dict[str, Any]] = [json.loads(line) for line in text.splitlines()]
    jobs = [
        PlannedJob(
            line["rule"],
            line["outputs"],
            line["reason"],
            line["resources"],
            line["wildcards"],
            line["priority"],
        )
        for line in lines
        if "rule" in line
    ]
    # Snakemake logs its job stats before and after the listing: the same counts twice.
    stats = [line["stats"] for line in lines if "stats" in line]
    counted = sum(int(n) for rule, n in (stats[-1] if stats else {}).items() if rule != "total")
    if counted != len(jobs):
        raise SkillevalError(
            f"the dry run counted {counted} job(s) but reported {len(jobs)} to the logger "
            "plugin skilleval (JOB_INFO events): this Snakemake release reports planned "
            "jobs differently; see tests/test_snakemake_internals.py"
        )
    return jobs


class KeptResults:
    """Whether a planned run's current evidence identity has a complete result kept: its
    job then restores that result instead of computing, unless an upstream job changes
    one of its inputs first."""

    def __init__(self, config: Config, plan: WorkflowPlan, root: Path) -> None:
        self.config, self.plan, self.root = config, plan, root
        self.scripts = root.resolve() / "scripts"
        # The digests the dry run's parse just kept: no module is parsed a second time.
        self.code_cache = SourceCache(root / paths.CODE_CACHE)

    @cached_property
    def model_code(self) -> dict[str, str]:
        """The code of every model run: one script, so computed once for all of them."""
        return model_run_code(self.scripts, self.code_cache)

    def exists(self, job: PlannedJob) -> bool:
        """False when nothing is kept, or when the identity cannot be computed here (an
        input missing on this machine): the run is then counted as certain."""
        parts = Path(next((o for o in job.outputs if o.endswith(paths.SUMMARY_FILE)), "")).parts
        try:
            with contextlib.chdir(self.root):
                if job.rule == "ablation_run" and len(parts) > 3:
                    return self._ablation_kept(parts[3])
                if job.rule == "eval_run" and len(parts) > 2:
                    return self._run_kept(self.plan.runs[parts[2]])
                if job.rule == "gate_masked_run" and len(parts) > 4:
                    return self._run_kept(self.plan.masked[parts[4]])
        except (SkillevalError, OSError, KeyError):
            return False
        return False

    def _run_kept(self, run: Any) -> bool:
        fingerprint = resolve(self.plan.run_inputs(run), self.model_code).fingerprint
        return _kept(Path(paths.JOURNAL_ROOT), run.name, fingerprint)

    @cached_property
    def ablation_inputs(self) -> AblationInputs:
        """What every ablation run's identity reads: built once, in the workflow root."""
        matrix_file = self.config.ablation.matrix
        return AblationInputs(
            load_matrix(matrix_file),
            matrix_file,
            trainer_run_code(self.code_cache),
            FileDigests(Path(paths.FILE_DIGESTS)),
        )

    def _ablation_kept(self, run_id: str) -> bool:
        identity = self.ablation_inputs.ablation_identity(SimpleNamespace(run_id=run_id))
        return (Path(paths.ABLATION_KEPT) / run_id / f"{identity}.complete").is_dir()


def _kept(journal_root: Path, run: str, fingerprint: str) -> bool:
    """A kept complete result in the run's journal, or in an archived one it would revive."""
    if (journal_root / run / f"{fingerprint}.complete").is_dir():
        return True
    archived = archive_root(journal_root / run) / run
    return any(archived.glob(f"{fingerprint}-*/{fingerprint}.complete"))


def run_cost(job: PlannedJob, root: Path, kept: KeptResults) -> RunCost | None:
    if job.rule not in PRICED_RULES:
        return None
    summary = next((root / o for o in job.outputs if o.endswith(paths.SUMMARY_FILE)), None)
    return RunCost(
        certain=not kept.exists(job),
        cards=int(job.resources.get("gpu", "0") or 0),
        last_wall_s=last_wall_s(summary) if summary else None,
    )
