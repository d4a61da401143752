"""A build's terminal output: one line per finished job, with the time left."""

from __future__ import annotations

import io
import json
import logging
import re
import signal
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from snakemake.logging import ColorizingTextHandler
from snakemake_interface_logger_plugins.common import LogEvent

from skilleval.progress.estimate import TimeLeft, recorded_durations, spoken
from skilleval.progress.handler import RECORDED_RUNS, BuildProgressHandler, job_label
from tests.conftest import interruptible, snakemake


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


class CtrlCMidLine(io.StringIO):
    """A terminal whose user presses Ctrl-C while a line is being written."""

    def write(self, text: str) -> int:
        signal.raise_signal(signal.SIGINT)
        return super().write(text)


def progress_line(done: int, total: int) -> logging.LogRecord:
    return logging.makeLogRecord({"event": LogEvent.PROGRESS, "done": done, "total": total})


def test_a_ctrl_c_while_a_line_is_written_stops_the_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with interruptible():
        # Snakemake's own handler drops it (snakemake/logging.py ColorizingTextHandler.emit):
        # the build would go on.
        ColorizingTextHandler(nocolor=True, stream=CtrlCMidLine()).emit(progress_line(1, 2))
        terminal = CtrlCMidLine()
        monkeypatch.setattr(sys, "stderr", terminal)
        settings = SimpleNamespace(nocolor=True, stdout=False, dryrun=False)
        handler = BuildProgressHandler(settings, None)  # type: ignore[arg-type]
        with pytest.raises(KeyboardInterrupt):
            handler.handle(progress_line(1, 2))
        assert terminal.getvalue().startswith("1 of 2 steps (50%) done")
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


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
