"""Snakemake's terminal output, one line per finished job, with the time left.

Snakemake's own stream handler prints every job as it starts with its whole input list,
output, log, wildcards, resources and reason: for the ``paper`` job that is kilobytes on
one line, and a build of 81 jobs prints over a thousand lines. This handler (Snakemake's
logger plugin ``skilleval``: snakemake_interface_logger_plugins.base.LogHandlerBase) prints
instead, as each job finishes::

    41 of 81 steps (51%) done; eval_run run=base-free took 2.1 s; about 35 s left

It leaves everything else to Snakemake's own handler and formatter (snakemake/logging.py
``ColorizingTextHandler``, ``DefaultFormatter``): errors with their logs, the job stats,
warnings, and the whole of a dry run.

With ``--logger-skilleval-plan-file PATH`` a dry run also writes each planned job's
JOB_INFO event (the logger plugin interface's structured record) to PATH as one JSON line:
``skilleval stale`` reads its plan from there, not from the printed listing.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from snakemake.logging import ColorizingTextHandler, format_percentage
from snakemake_interface_logger_plugins.base import LogHandlerBase
from snakemake_interface_logger_plugins.common import LogEvent

from skilleval import paths
from skilleval.config.loading import read_mapping
from skilleval.config.typos import did_you_mean
from skilleval.errors import ConfigError
from skilleval.logs import WholeLines, resume_command, rule_targets
from skilleval.progress.estimate import TimeLeft, recorded_durations, spoken

# What Snakemake's scheduler logs before each selection (snakemake/scheduling/
# job_scheduler.py); "Execute N jobs..." after it is the JOB_STARTED event.
SELECTING = "Select jobs to execute..."
# Where model runs record their wall time: each run's summary, and the kept copy of every
# complete run beside its journal (which a rebuild's deleted outputs leave in place).
RECORDED_RUN = f"{paths.JOURNAL_ROOT}/*/*.complete/{paths.SUMMARY_FILE}"
RECORDED_RUNS = {"eval_run": RECORDED_RUN, "gate_masked_run": RECORDED_RUN}
# How Snakemake reports a target no rule makes (snakemake/exceptions.py MissingRuleException)
# and an input function's refusal of a target (InputFunctionException): the project's own
# message stands alone, without Snakemake's traceback around it.
NO_RULE = re.compile(r"MissingRuleException:\s*No rule to produce (\S+)")
REFUSED = re.compile(r"InputFunctionException.*?SkillevalError: ([^\n]+)", re.S)
# How Snakemake reports a --configfile it cannot read (snakemake/common/configfile.py:
# a YAML error without file or line; a missing file as open()'s traceback).
CONFIGFILE_FAILED = re.compile(
    r"Config file is not valid JSON or YAML|in load_configfile.*FileNotFoundError", re.S
)
CONFIGFILE_OPTIONS = ("--configfile", "--configfiles")
# How Snakemake reports a job that a Ctrl-C stopped (its RuleException quotes the job's
# CalledProcessError): killed by the signal, or exited 128 + SIGINT.
INTERRUPTED_JOB = re.compile(r"died with <Signals\.SIG(INT|TERM): \d+>|exit status 1(30|43)\b")
# What Snakemake says after a failed job (snakemake/scheduling/job_scheduler.py,
# snakemake/api.py): after an interrupt these only repeat the stop, and "look above for
# error messages" points at errors there were none of.
AFTER_A_STOP = (
    "Removing output files of failed job",
    "Shutting down, this might take some time.",
    "Exiting because a job execution failed.",
    "Complete log(s):",
    "Elapsed time:",
    "Will exit after finishing currently running jobs",
)
# What Snakemake's scheduler says when the Ctrl-C reaches it before any job's failure
# (snakemake/scheduling/job_scheduler.py): it cancels the running jobs, which then report
# no error of their own.
USER_STOP = "Terminating processes on user request"
# Snakemake's last word on a build with a failed job (snakemake/api.py): after a stop, the
# handler says instead how to resume.
BUILD_FAILED = "At least one job did not complete successfully."


def job_label(rule: str, wildcards: dict[str, Any] | None) -> str:
    """``eval_run run=base-free``: the rule and its wildcards, without the file lists."""
    shown = " ".join(f"{k}={v}" for k, v in (wildcards or {}).items())
    return f"{rule} {shown}" if shown else rule


def quiet_interrupts(previous: Callable[[Any], object]) -> Callable[[Any], None]:
    """An unraisable-exception hook (sys.unraisablehook) that drops a KeyboardInterrupt.

    Snakemake runs its scheduler in asyncio, whose SIGINT handler (asyncio/runners.py
    ``_on_sigint``) may raise KeyboardInterrupt inside a weakref callback, where Python
    can only print it as "Exception ignored in ..." with a traceback. The build stops all
    the same: the jobs in its process group got the signal, and their failure ends it."""

    def hook(unraisable: Any) -> None:
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):
            previous(unraisable)

    return hook


def unknown_target(target: str, rules: list[str]) -> str:
    """A target that is neither a rule nor a path, with the rules nearest to it."""
    close = did_you_mean(target, rules)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    return (
        f"no rule or file {target!r} to build: {hint}a target is a rule "
        f"({', '.join(rules) or 'paper'}) or an output path (results/..., paper/...)"
    )


def given_configfiles(argv: list[str]) -> list[str]:
    """The files given to --configfile(s) on Snakemake's command line (nargs="+": every
    word up to the next option)."""
    found, taking = [], False
    for word in argv[1:]:
        option, _, value = word.partition("=")
        if option in CONFIGFILE_OPTIONS:
            taking = not value
            found += [value] if value else []
        elif word.startswith("-"):
            taking = False
        elif taking:
            found.append(word)
    return found


def configfile_error(message: str, argv: list[str]) -> str | None:
    """Our loader's words (file, line, column, fix) for a --configfile Snakemake could not
    read, which it reports without naming the file (snakemake/common/configfile.py)."""
    if not CONFIGFILE_FAILED.search(message):
        return None
    for path in given_configfiles(argv):
        try:
            read_mapping(path, "--configfile")
        except ConfigError as error:
            return str(error)
    return None


def explained(message: str, argv: list[str] | None = None) -> str | None:
    """The project's one line for an error it words itself, or None for any other."""
    refused = REFUSED.search(message)
    if refused:
        return f"skilleval: {refused[1].strip()}"
    unreadable = configfile_error(message, sys.argv if argv is None else argv)
    if unreadable:
        return f"skilleval: {unreadable}"
    missing = NO_RULE.search(message)
    if missing and "/" not in missing[1]:
        return f"skilleval: {unknown_target(missing[1], rule_targets())}"
    return None


def planned_job(fields: dict[str, Any]) -> dict[str, Any]:
    """The parts of a JOB_INFO event that say what a job is and why it runs (the plan
    file's job lines; its one stats line holds the dry run's jobs by rule)."""
    resources = fields.get("resources") or {}
    return {
        "rule": fields["rule_name"],
        "outputs": [str(o) for o in fields.get("output") or []],
        "reason": str(fields.get("reason") or ""),
        "wildcards": {k: str(v) for k, v in (fields.get("wildcards") or {}).items()},
        "resources": {k: str(v) for k, v in resources.items() if not k.startswith("_")},
        "priority": str(fields.get("priority", 0)),
    }


class BuildProgressHandler(LogHandlerBase):
    def __post_init__(self) -> None:
        if not self.common_settings.dryrun:
            sys.unraisablehook = quiet_interrupts(sys.unraisablehook)
        self._snakemake = ColorizingTextHandler(
            nocolor=self.common_settings.nocolor,
            stream=WholeLines(sys.stdout if self.common_settings.stdout else sys.stderr),
        )
        self._jobs: dict[int, tuple[str, str, float]] = {}  # jobid -> (rule, label, started)
        self._last_finished: str | None = None
        self.time_left = TimeLeft()
        # A Ctrl-C: Snakemake reports each job it stopped as a failure with its whole
        # file lists; the build says instead one line per job and how to resume.
        # Interrupted jobs whose exception is logged but not yet their failure: Snakemake
        # reports each job from its own pool thread, so two stopped jobs' records interleave.
        self._stopping_jobs = 0
        self._user_stop = False
        self._interrupted: list[str] = []
        self._failed = False

    # LogHandlerBase: Snakemake attaches its default filter and formatter to this handler.
    @property
    def writes_to_stream(self) -> bool:
        return True

    @property
    def writes_to_file(self) -> bool:
        return False

    @property
    def has_filter(self) -> bool:
        return False

    @property
    def has_formatter(self) -> bool:
        return False

    @property
    def needs_rulegraph(self) -> bool:
        return False

    def emit(self, record: logging.LogRecord) -> None:
        """Called on the thread Snakemake logs from: its QueueListener's, not the main
        thread (snakemake/logging.py LoggerManager._setup_plugins)."""
        event = getattr(record, "event", None)
        if event == LogEvent.JOB_INFO and self.common_settings.dryrun:
            self._plan(planned_job(record.__dict__))
        if event == LogEvent.RUN_INFO and self.common_settings.dryrun:
            self._plan({"stats": dict(record.__dict__.get("stats") or {})})
        if not self.common_settings.dryrun and (
            event == LogEvent.JOB_STARTED or record.getMessage() == SELECTING
        ):
            return  # the scheduler's own beat: two lines a step, saying nothing per job
        own_words = explained(record.getMessage()) if event == LogEvent.ERROR else None
        if own_words:
            self._say(own_words)
            return
        if not self.common_settings.dryrun and self._interrupt(event, record):
            return
        if self.common_settings.dryrun or event not in (
            LogEvent.JOB_INFO,
            LogEvent.JOB_FINISHED,
            LogEvent.PROGRESS,
        ):
            stats = record.__dict__.get("stats")
            if event == LogEvent.RUN_INFO and isinstance(stats, dict):
                self.time_left.plan(stats)
                self.time_left.recorded = recorded_durations(Path.cwd(), RECORDED_RUNS)
            self._print(record)
            return
        now = time.monotonic()
        fields: dict[str, Any] = record.__dict__  # Snakemake's event fields (jobs.py log_info)
        if event == LogEvent.JOB_INFO:
            rule = fields["rule_name"]
            self._jobs[int(fields["jobid"])] = (rule, job_label(rule, fields["wildcards"]), now)
            self.time_left.job_started(now)
        elif event == LogEvent.JOB_FINISHED:
            self._finished(int(fields["job_id"]), now)
        else:
            done, total = int(fields["done"]), int(fields["total"])
            parts = [f"{done} of {total} steps ({format_percentage(done, total)}) done"]
            if self._last_finished:
                parts.append(self._last_finished)
            parts.append(spoken(self.time_left.seconds(now)))
            line = "; ".join(parts)
            self._say(line)

    def _plan(self, line: dict[str, Any]) -> None:
        plan_file = getattr(self.settings, "plan_file", None)
        if plan_file:
            with open(plan_file, "a", encoding="utf-8") as plan:
                plan.write(json.dumps(line) + "\n")

    def _finished(self, jobid: int, now: float) -> None:
        if jobid not in self._jobs:
            self._last_finished = None
            return
        rule, label, started = self._jobs.pop(jobid)
        self.time_left.job_finished(rule, now - started)
        self._last_finished = f"{label} took {now - started:.1f} s"

    def _interrupt(self, event: Any, record: logging.LogRecord) -> bool:
        """Whether ``record`` belongs to a stop by Ctrl-C, which this handler reports in
        its own lines: one per stopped job, and at the end the command that resumes."""
        message = record.getMessage()
        if event == LogEvent.ERROR and INTERRUPTED_JOB.search(message):
            self._stopping_jobs += 1
            return True
        if event == LogEvent.JOB_ERROR:
            if not self._stopping_jobs:
                self._failed = True
                return False
            self._stopping_jobs -= 1
            fields: dict[str, Any] = record.__dict__
            started = self._jobs.pop(int(fields.get("jobid", -1)), None)
            label = started[1] if started else str(fields.get("rule_name", "a job"))
            self._stopped(label, fields.get("log") or [])
            return True
        if USER_STOP in message and not self._failed:
            self._user_stop = True
            return True
        if not ((self._interrupted or self._user_stop) and not self._failed):
            return False
        if BUILD_FAILED in message:
            for cancelled in list(self._jobs):  # cancelled by the scheduler: no error of their own
                self._stopped(self._jobs.pop(cancelled)[1], [])
            self._say(
                f"skilleval: build interrupted, {len(self._interrupted)} job(s) stopped; "
                f"what finished is kept. Resume with: {resume_command('paper')}"
            )
            return True
        return any(part in message for part in AFTER_A_STOP)

    def _stopped(self, label: str, logs: list[Any]) -> None:
        self._interrupted.append(label)
        where = f" (log: {', '.join(map(str, logs))})" if logs else ""
        self._say(f"skilleval: stopped {label}{where}")

    def _say(self, line: str) -> None:
        record = {"msg": line, "levelno": logging.INFO, "levelname": "INFO"}
        self._print(logging.makeLogRecord(record))

    def _print(self, record: logging.LogRecord) -> None:
        if self._snakemake.formatter is None:
            self._snakemake.setFormatter(self.formatter)
        self._snakemake.emit(record)
