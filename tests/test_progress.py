"""A build's terminal output: one line per finished job, with the time left."""

from __future__ import annotations

import io
import json
import logging
import re
import sys
import threading
from logging.handlers import QueueListener
from pathlib import Path
from queue import Queue
from types import SimpleNamespace

import pytest
from snakemake_interface_logger_plugins.common import LogEvent

from skilleval.logs import also_to_terminal, logged
from skilleval.progress.estimate import TimeLeft, recorded_durations, spoken
from skilleval.progress.handler import (
    RECORDED_RUNS,
    BuildProgressHandler,
    job_label,
    quiet_interrupts,
)
from tests.conftest import snakemake


def test_time_left_weighs_each_rule_by_its_own_finished_jobs() -> None:
    left = TimeLeft()
    left.plan({"eval_run": 4, "contrast": 10, "total": 14})
    left.job_started(0.0)
    left.job_finished("eval_run", 8.0)
    left.job_finished("contrast", 1.0)
    # 9 job-seconds in 9 s of wall: one job at a time; 3 runs x 8 s + 9 contrasts x 1 s
    assert left.seconds(now=9.0) == pytest.approx(3 * 8.0 + 9 * 1.0)
    # twice the parallelism shown halves it
    assert left.seconds(now=4.5) == pytest.approx((3 * 8.0 + 9 * 1.0) / 2)


def test_a_rule_with_nothing_finished_counts_as_the_mean_job() -> None:
    left = TimeLeft()
    left.plan({"a": 2, "b": 3})
    left.job_started(10.0)
    left.job_finished("a", 2.0)
    left.job_finished("a", 4.0)
    assert left.seconds(now=16.0) == pytest.approx(3 * 3.0)


def test_a_rule_with_nothing_finished_counts_as_its_recorded_runs(tmp_path: Path) -> None:
    """A build whose model runs have not finished yet: its small jobs say nothing of them."""
    for run, wall in (("base-free", 1700.0), ("final-ST", 1900.0)):
        kept = tmp_path / "results" / "journal" / run / "0123abcd.complete" / "summary.json"
        kept.parent.mkdir(parents=True)
        kept.write_text(json.dumps({"provenance": {"execution": {"wall_s": wall}}}))
    recorded = recorded_durations(tmp_path, RECORDED_RUNS)
    assert recorded == {"eval_run": 1800.0, "gate_masked_run": 1800.0}
    left = TimeLeft(recorded=recorded)
    left.plan({"world_tasks": 1, "eval_run": 2})
    left.job_started(0.0)
    left.job_finished("world_tasks", 1.0)
    assert left.seconds(now=1.0) == pytest.approx(2 * 1800.0)


def test_nothing_finished_means_unknown_not_zero() -> None:
    left = TimeLeft()
    left.plan({"a": 2})
    assert left.seconds(now=5.0) is None
    assert spoken(None) == "time left unknown"
    assert spoken(42) == "about 42 s left" and spoken(600) == "about 10 min left"
    assert spoken(3 * 3600) == "about 3.0 h left"


def test_a_job_is_named_by_its_rule_and_wildcards() -> None:
    assert job_label("eval_run", {"run": "base-free"}) == "eval_run run=base-free"
    assert job_label("paper", {}) == "paper"


def progress_line(done: int, total: int) -> logging.LogRecord:
    return record(LogEvent.PROGRESS, "None", done=done, total=total)


def record(event: LogEvent | None, msg: str, **fields: object) -> logging.LogRecord:
    level = logging.ERROR if event in (LogEvent.ERROR, LogEvent.JOB_ERROR) else logging.INFO
    return logging.makeLogRecord(
        {"event": event, "msg": msg, "levelno": level, "levelname": logging.getLevelName(level)}
        | fields
    )


# What Snakemake 9 logs when Ctrl-C stops a running job, in order (records as its
# QueueListener hands them to a logger plugin; messages from snakemake/exceptions.py,
# snakemake/scheduling/job_scheduler.py and snakemake/api.py).
INTERRUPTED_BUILD = [
    record(
        LogEvent.JOB_INFO,
        " Rule: eval_run, Jobid: 7",
        jobid=7,
        rule_name="eval_run",
        wildcards={"run": "base-free"},
    ),
    progress_line(3, 9),
    record(
        LogEvent.ERROR,
        "RuleException:\nCalledProcessError in file rules/eval.smk, line 30:\nCommand "
        "'set -euo pipefail; python script.py' died with <Signals.SIGINT: 2>.",
    ),
    record(
        LogEvent.JOB_ERROR,
        "Error in rule eval_run, jobid: 7",
        jobid=7,
        rule_name="eval_run",
        log=["results/logs/runs/base-free.log"],
    ),
    record(None, "Removing output files of failed job eval_run since they might be corrupted:"),
    record(None, "Shutting down, this might take some time."),
    record(None, "Exiting because a job execution failed. Look above for error messages"),
    record(None, "Complete log(s): .snakemake/log/x.snakemake.log"),
    record(LogEvent.ERROR, "WorkflowError:\nAt least one job did not complete successfully."),
]


class Terminal(io.StringIO):
    """A terminal that keeps each write it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return super().write(text)


def through_snakemakes_queue(
    records: list[logging.LogRecord], dryrun: bool = False, terminal: io.StringIO | None = None
) -> str:
    """What the handler prints for ``records`` when called as Snakemake calls a logger
    plugin: from a logging QueueListener's thread (snakemake/logging.py)."""
    terminal = terminal or io.StringIO()
    settings = SimpleNamespace(nocolor=True, stdout=False, dryrun=dryrun)
    original, hook = sys.stderr, sys.unraisablehook
    sys.stderr = terminal
    try:
        handler = BuildProgressHandler(settings, None)  # type: ignore[arg-type]
    finally:
        sys.stderr, sys.unraisablehook = original, hook
    handler.setFormatter(logging.Formatter("%(message)s"))
    threads: list[str] = []
    handler.addFilter(lambda r: threads.append(threading.current_thread().name) or True)
    queue: Queue[logging.LogRecord] = Queue()
    listener = QueueListener(queue, handler, respect_handler_level=True)
    listener.start()
    for one in records:
        queue.put(one)
    listener.stop()
    assert threads and threading.main_thread().name not in threads
    return terminal.getvalue()


# The same Ctrl-C when it reaches Snakemake's scheduler before any job fails: it cancels
# the running jobs (snakemake/scheduling/job_scheduler.py), which then log no error.
CANCELLED_BUILD = [
    INTERRUPTED_BUILD[0],
    record(
        LogEvent.JOB_INFO,
        " Rule: gate_masked_run, Jobid: 8",
        jobid=8,
        rule_name="gate_masked_run",
        wildcards={"gate": "draft16", "masked": "masked-03"},
    ),
    progress_line(3, 9),
    record(None, "Terminating processes on user request, this might take some time."),
    record(None, "Complete log(s): .snakemake/log/x.snakemake.log"),
    record(None, "Elapsed time: 0:00:17.015095"),
    record(LogEvent.ERROR, "WorkflowError:\nAt least one job did not complete successfully."),
]


def stopped_job(
    jobid: int, rule: str, wildcards: dict[str, str], log: str
) -> list[logging.LogRecord]:
    """A job's start, then, once Ctrl-C stops it, its exception and its failure."""
    started = record(
        LogEvent.JOB_INFO, f" Rule: {rule}, Jobid: {jobid}", jobid=jobid, rule_name=rule,
        wildcards=wildcards,
    )  # fmt: skip
    error = record(
        LogEvent.ERROR,
        f"RuleException:\nCalledProcessError in file rules/{rule}.smk, line 32:\nCommand "
        f"'set -euo pipefail; python tmp.{rule}.py' returned non-zero exit status 130.",
    )
    failure = record(
        LogEvent.JOB_ERROR, f"Error in rule {rule}, jobid: {jobid}", jobid=jobid,
        rule_name=rule, log=[log],
    )  # fmt: skip
    return [started, error, failure]


# Two jobs stopped at once: Snakemake reports each from its own pool thread
# (snakemake/executors/local.py, LocalExecutor._callback), so both exceptions can come
# before either job's failure, as a CI build's did.
MASKED = stopped_job(26, "gate_masked_run", {"gate": "draft16", "masked": "masked-10"}, "g.log")
TABLE = stopped_job(75, "ablation_table", {"bench": "docvqa"}, "t.log")
INTERLEAVED_BUILD = [
    MASKED[0],
    TABLE[0],
    progress_line(27, 81),
    record(None, "Terminating processes on user request, this might take some time."),
    MASKED[1],
    TABLE[1],
    MASKED[2],
    TABLE[2],
    *INTERRUPTED_BUILD[-2:],
]

RESUME = "Resume with: snakemake -j 4 paper"


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (
            INTERRUPTED_BUILD,
            [
                "3 of 9 steps (33%) done; time left unknown",
                "skilleval: stopped eval_run run=base-free (log: results/logs/runs/base-free.log)",
                f"skilleval: build interrupted, 1 job(s) stopped; what finished is kept. {RESUME}",
            ],
        ),
        (
            CANCELLED_BUILD,
            [
                "3 of 9 steps (33%) done; time left unknown",
                "skilleval: stopped eval_run run=base-free",
                "skilleval: stopped gate_masked_run gate=draft16 masked=masked-03",
                f"skilleval: build interrupted, 2 job(s) stopped; what finished is kept. {RESUME}",
            ],
        ),
        (
            INTERLEAVED_BUILD,
            [
                "27 of 81 steps (33%) done; time left unknown",
                "skilleval: stopped gate_masked_run gate=draft16 masked=masked-10 (log: g.log)",
                "skilleval: stopped ablation_table bench=docvqa (log: t.log)",
                f"skilleval: build interrupted, 2 job(s) stopped; what finished is kept. {RESUME}",
            ],
        ),
    ],
    ids=["a-job-logs-its-error", "the-scheduler-cancels-the-jobs", "two-jobs-interleave"],
)
def test_stopped_jobs_are_one_line_each_and_the_build_says_how_to_resume(
    build: list[logging.LogRecord], expected: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKILLEVAL_BUILD_COMMAND", "snakemake -j 4 paper")
    assert through_snakemakes_queue(build).splitlines() == expected


def test_an_interrupt_python_cannot_raise_is_dropped_and_other_errors_kept() -> None:
    seen: list[BaseException] = []
    hook = quiet_interrupts(lambda unraisable: seen.append(unraisable.exc_value))
    hook(SimpleNamespace(exc_value=KeyboardInterrupt()))
    error = ValueError("a real defect")
    hook(SimpleNamespace(exc_value=error))
    assert seen == [error]


def test_each_line_reaches_the_terminal_in_one_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The jobs print their progress to the build's terminal too. Python's stderr writes
    through, so a line written as text, then newline, can take in another process's line
    between the two: a step line went missing that way from a CI build."""
    terminal = Terminal()
    printed = through_snakemakes_queue(INTERRUPTED_BUILD, terminal=terminal)
    assert len(terminal.writes) >= 3 and "".join(terminal.writes) == printed
    assert all(write.endswith("\n") for write in terminal.writes), terminal.writes
    job_terminal = Terminal()
    monkeypatch.setattr(sys, "__stderr__", job_terminal)
    with logged(str(tmp_path / "job.log")):
        also_to_terminal("[base-free] 3/48 tasks")
    assert job_terminal.writes == ["skilleval: [base-free] 3/48 tasks\n"]


def test_a_job_that_fails_on_its_own_keeps_snakemakes_report() -> None:
    failed = [
        r
        if r.getMessage() != INTERRUPTED_BUILD[2].getMessage()
        else record(LogEvent.ERROR, "RuleException:\nValueError in file scripts/x.py, line 3")
        for r in INTERRUPTED_BUILD
    ]
    printed = through_snakemakes_queue(failed)
    assert "Error in rule eval_run" in printed and "ValueError" in printed
    assert "Look above for error messages" in printed and "stopped" not in printed


@pytest.mark.slow
def test_a_build_prints_one_line_per_job_and_a_dry_run_lists_every_job(
    small_paper_build: tuple[Path, str],
) -> None:
    workdir, out = small_paper_build
    steps = re.findall(r"^(\d+) of (\d+) steps \(\d+%\) done; (.+); (.+)$", out, re.MULTILINE)
    total = int(steps[-1][1])
    assert [int(s[0]) for s in steps] == list(range(1, total + 1))  # one line per job
    assert all(s[3] == "nearly done" or s[3].endswith("left") for s in steps)
    assert any("eval_run run=base-free took" in s[2] for s in steps)
    # no job's file lists, reasons or scheduler beats
    for chatter in ("    input:", "    output:", "reason:", "Select jobs", "Execute "):
        assert chatter not in out, chatter
    assert len(out.splitlines()) < 2 * total + 80, len(out.splitlines())
    assert "skilleval: the paper's evidence is built." in out
    # A dry run is Snakemake's own listing, which `snakemake -n` users and `skilleval stale`
    # read: every job it plans is listed with its output and reason.
    dry = snakemake(workdir, "paper", "-n", "-R", "eval_run", "--configfile", "config/small.yaml")
    listing = dry.stdout + dry.stderr
    assert "rule eval_run:" in listing and "    output: results/runs/" in listing
    assert "reason: Forced execution" in listing


def test_an_interrupt_a_library_turned_into_its_own_error_still_ends_the_job_quietly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pydantic-core wraps an exception raised while it builds a validator (a Ctrl-C
    landing there) in a SchemaError: the job still ends as interrupted, no traceback."""
    import signal

    from skilleval import logs

    monkeypatch.setattr(logs, "RECEIVED", [])
    log = tmp_path / "job.log"
    with pytest.raises(logs.Interrupted) as stopped, logged(str(log)):
        try:
            logs._raise_interrupted(signal.SIGINT, None)
        except logs.Interrupted as interrupt:
            raise RuntimeError(f"Interrupted: {interrupt.code}") from None
    assert stopped.value.signal_name == "SIGINT" and stopped.value.code == 130
    assert "Traceback" not in log.read_text() and "interrupted by SIGINT" in log.read_text()
    monkeypatch.setattr(logs, "RECEIVED", [])
    with pytest.raises(RuntimeError), logged(str(tmp_path / "other.log")):
        raise RuntimeError("a real defect")
    assert "Traceback" in (tmp_path / "other.log").read_text()
