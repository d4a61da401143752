"""Every Snakemake internal skilleval reads, called on the installed Snakemake.

skilleval/workflow/snakemake_internals.py reads the Workflow object; the logger plugin
(skilleval/progress/handler.py) recognises a few of Snakemake's messages; `skilleval
stale` reads the dry run's JOB_INFO and RUN_INFO events through that plugin
(skilleval/workflow/planned.py). A Snakemake
release that changes one of them fails here, naming it, before a build misreads it.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest
import snakemake.logging
import snakemake.scheduling.job_scheduler

from skilleval.errors import SkillevalError
from skilleval.progress.handler import AFTER_A_STOP, BUILD_FAILED, INTERRUPTED_JOB, SELECTING
from skilleval.workflow.planned import PlannedJob, plan_options, read_plan_file
from skilleval.workflow.snakemake_internals import params_change, reason_parts

PROBE = """
import json
from skilleval.workflow.snakemake_internals import (
    config_files, default_resource_args, host_resource, targets_rule,
)

seen = {
    "config_files": config_files(workflow),
    "gpu": host_resource(workflow, "gpu"),
    "default_resources": default_resource_args(workflow),
}

rule done:
    output: "out/{name}.txt"
    params: n=1
    resources: gpu=1
    shell: "touch {output}"

onstart:
    seen["targets_done"] = targets_rule(workflow, "done")
    seen["targets_other"] = targets_rule(workflow, "other")
    with open("seen.json", "w") as handle:
        json.dump(seen, handle)
"""


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, object], list[PlannedJob]]:
    workdir = tmp_path_factory.mktemp("internals")
    (workdir / "Snakefile").write_text(PROBE)
    (workdir / "extra.yaml").write_text("a: 1\n")
    command = [
        sys.executable, "-m", "snakemake", "out/x.txt", "-j", "1",
        "--resources", "gpu=3", "--default-resources", "gpu_devices='1-3'",
        "--configfile", "extra.yaml",
    ]  # fmt: skip
    done = subprocess.run(command, cwd=workdir, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    plan_file = workdir / "plan.jsonl"
    dry = subprocess.run(
        [sys.executable, "-m", "snakemake", "out/y.txt", "-n", "--resources", "gpu=3",
         *plan_options(plan_file)],
        cwd=workdir, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert dry.returncode == 0, dry.stdout + dry.stderr
    return json.loads((workdir / "seen.json").read_text()), read_plan_file(plan_file)


def test_the_workflow_internals_answer(
    probed: tuple[dict[str, object], list[PlannedJob]],
) -> None:
    seen, _ = probed
    default, extra = seen["config_files"]  # type: ignore[misc]
    assert default == "config/config.yaml" and Path(extra).name == "extra.yaml"
    assert seen["gpu"] == 3
    assert "gpu_devices='1-3'" in seen["default_resources"]  # type: ignore[operator]
    assert seen["targets_done"] is True and seen["targets_other"] is False


def test_the_dry_run_reports_its_jobs_to_the_logger_plugin(
    probed: tuple[dict[str, object], list[PlannedJob]],
) -> None:
    _, jobs = probed
    assert len(jobs) == 1, "Snakemake's JOB_INFO events (snakemake/jobs.py Job.log_info)"
    [job] = jobs
    assert (job.rule, job.outputs, job.wildcards) == ("done", ["out/y.txt"], {"name": "y"})
    assert job.priority == "0"
    assert job.reason.startswith("Missing output files")
    assert job.resources.get("gpu") == "1"


def source_of(*modules: object) -> str:
    return "".join(inspect.getsource(m) for m in modules)  # type: ignore[arg-type]


def test_the_messages_the_logger_plugin_recognises_are_snakemakes() -> None:
    scheduler = source_of(snakemake.scheduling.job_scheduler)
    assert SELECTING in scheduler, "snakemake/scheduling/job_scheduler.py"
    snakemake_root = Path(snakemake.__file__).parent
    every = "".join(p.read_text() for p in snakemake_root.rglob("*.py"))
    # What the handler acts on; the lines it only leaves out after a stop (AFTER_A_STOP)
    # may come and go between releases.
    for message in (BUILD_FAILED, "No rule to produce", "class InputFunctionException"):
        assert message in every, f"Snakemake no longer says {message!r}"
    assert any(m in every for m in AFTER_A_STOP)
    assert "def format_percentage" in source_of(snakemake.logging)
    assert "class ColorizingTextHandler" in source_of(snakemake.logging)
    # What Python's subprocess says of a job a signal stopped (Snakemake quotes it).
    died = str(subprocess.CalledProcessError(-2, "python x.py"))
    assert INTERRUPTED_JOB.search(died), died


def test_a_plan_without_every_counted_job_is_refused(tmp_path: Path) -> None:
    plan_file = tmp_path / "plan.jsonl"
    job = {"rule": "done", "outputs": ["out/y.txt"], "reason": "Missing", "resources": {},
           "wildcards": {}, "priority": "0"}  # fmt: skip
    counts = {"stats": {"done": 2, "total": 2}}
    plan_file.write_text("\n".join(json.dumps(line) for line in (counts, job, counts)))
    with pytest.raises(SkillevalError, match=r"counted 2 job\(s\) but reported 1"):
        read_plan_file(plan_file)
    assert read_plan_file(tmp_path / "nothing-planned.jsonl") == []


TRIGGER_PROBE = """
from pydantic import BaseModel
from skilleval.workflow.snakemake_internals import not_a_rerun_trigger


class Where(BaseModel):
    url: str


rule done:
    output: "out.txt"
    params:
        where=not_a_rerun_trigger(Where(url=config["url"])),
        seed=config["seed"],
    shell: "echo {params.where.url} {params.seed} > {output}"
"""


def test_a_model_in_params_reaches_the_job_but_is_no_rerun_trigger(tmp_path: Path) -> None:
    """Two Snakemake 9 behaviours no documented interface gives: the params trigger skips a
    model, and a job's reason comes as words, decoded in snakemake_internals."""
    (tmp_path / "Snakefile").write_text(TRIGGER_PROBE)

    def snakemake_with(url: str, seed: int, *args: str) -> str:
        command = [sys.executable, "-m", "snakemake", "-j", "1", *args,
                   "--config", f"url={url}", f"seed={seed}"]  # fmt: skip
        done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout + done.stderr

    snakemake_with("http://a:1", 1)
    assert (tmp_path / "out.txt").read_text() == "http://a:1 1\n"
    # Snakemake leaves a params value it cannot write down out of its params trigger
    # (snakemake/persistence/__init__.py, _serialize_param): a release that compares it
    # would re-run every evaluation when a server moves (rules/eval.smk, execution).
    moved = snakemake_with("http://b:2", 1, "-n")
    assert "Nothing to be done" in moved, f"a model in params is now a rerun trigger:\n{moved}"
    # A plain value still is one (the params trigger itself works).
    changed = snakemake_with("http://a:1", 2, "-n")
    assert "Params have changed" in changed
    # The installed Snakemake's words decode as the stale report reads them: the reason
    # reaches skilleval as text only (the logger's job_info event carries str(Reason)).
    (reason,) = [line.split("reason:", 1)[1] for line in changed.splitlines() if "reason:" in line]
    ((kind, detail, _),) = reason_parts(reason)
    assert kind == "params" and params_change(detail) == ([1], [2]), reason
    (tmp_path / "out.txt").unlink()
    missing = snakemake_with("http://a:1", 1, "-n")
    (reason,) = [line.split("reason:", 1)[1] for line in missing.splitlines() if "reason:" in line]
    assert reason_parts(reason) == [("missing", "out.txt", "Missing output files: out.txt")]
