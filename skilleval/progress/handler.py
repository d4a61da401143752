"""Snakemake's terminal output, one line per finished job, with the time left.

Snakemake's own stream handler prints every job as it starts with its whole input list,
output, log, wildcards, resources and reason: for the ``paper`` job that is kilobytes on
one line, and a build of 81 jobs prints over a thousand lines. This handler (Snakemake's
logger plugin ``skilleval``: snakemake_interface_logger_plugins.base.LogHandlerBase) prints
instead, as each job finishes::

    41 of 81 steps (51%) done; eval_run run=base-free took 2.1 s; about 35 s left

It leaves everything else to Snakemake's own handler and formatter (snakemake/logging.py
``ColorizingTextHandler``, ``DefaultFormatter``): errors with their logs, the job stats,
warnings, and the whole of a dry run, whose job listing ``snakemake -n`` and
``skilleval stale`` read.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from snakemake.logging import ColorizingTextHandler, format_percentage
from snakemake_interface_logger_plugins.base import LogHandlerBase
from snakemake_interface_logger_plugins.common import LogEvent

from skilleval import paths
from skilleval.progress.estimate import TimeLeft, recorded_durations, spoken

# What Snakemake's scheduler logs before each selection (snakemake/scheduling/
# job_scheduler.py); "Execute N jobs..." after it is the JOB_STARTED event.
SELECTING = "Select jobs to execute..."
# Where model runs record their wall time: each run's summary, and the kept copy of every
# complete run beside its journal (which a rebuild's deleted outputs leave in place).
RECORDED_RUN = f"{paths.JOURNAL_ROOT}/*/*.complete/summary.json"
RECORDED_RUNS = {"eval_run": RECORDED_RUN, "gate_masked_run": RECORDED_RUN}


def job_label(rule: str, wildcards: dict[str, Any] | None) -> str:
    """``eval_run run=base-free``: the rule and its wildcards, without the file lists."""
    shown = " ".join(f"{k}={v}" for k, v in (wildcards or {}).items())
    return f"{rule} {shown}" if shown else rule


@contextmanager
def interrupts_held() -> Iterator[None]:
    """SIGINT held over the block and delivered after it, to the handler in place before.

    Snakemake's ColorizingTextHandler.emit ends in ``except (KeyboardInterrupt,
    SystemExit): pass`` (snakemake/logging.py): a Ctrl-C that lands while it writes a line
    is dropped, and the build goes on as if no key were pressed. Every line of a build
    goes through it here, so the handler holds the signal instead. Only the main thread
    receives signals, and only it may set their handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if held:
            signal.raise_signal(signal.SIGINT)


class BuildProgressHandler(LogHandlerBase):
    def __post_init__(self) -> None:
        self._snakemake = ColorizingTextHandler(
            nocolor=self.common_settings.nocolor,
            stream=sys.stdout if self.common_settings.stdout else sys.stderr,
        )
        self._jobs: dict[int, tuple[str, str, float]] = {}  # jobid -> (rule, label, started)
        self._last_finished: str | None = None
        self.time_left = TimeLeft()

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
        event = getattr(record, "event", None)
        if not self.common_settings.dryrun and (
            event == LogEvent.JOB_STARTED or record.getMessage() == SELECTING
        ):
            return  # the scheduler's own beat: two lines a step, saying nothing per job
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
            self._print(
                logging.makeLogRecord({"msg": line, "levelno": logging.INFO, "levelname": "INFO"})
            )

    def _finished(self, jobid: int, now: float) -> None:
        if jobid not in self._jobs:
            self._last_finished = None
            return
        rule, label, started = self._jobs.pop(jobid)
        self.time_left.job_finished(rule, now - started)
        self._last_finished = f"{label} took {now - started:.1f} s"

    def _print(self, record: logging.LogRecord) -> None:
        if self._snakemake.formatter is None:
            self._snakemake.setFormatter(self.formatter)
        with interrupts_held():
            self._snakemake.emit(record)
