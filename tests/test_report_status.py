"""The report's word on whether it is current (workflow.report_status), without a build:
a report made from a graph with pending jobs says so, naming them and the command."""

from __future__ import annotations

from pathlib import Path

import pytest

from skilleval import paths
from skilleval.workflow import report_status
from skilleval.workflow.report_status import profile_of, report_requested, status_html
from skilleval.workflow.stale import StaleJob


def test_only_a_report_asks_for_the_status() -> None:
    assert report_requested(["snakemake", "--report", "r.html"])
    assert report_requested(["snakemake", "--report=r.html", "paper"])
    assert not report_requested(["snakemake", "-n", "paper", "--configfile", "report.yaml"])


def test_pending_jobs_are_named_with_their_causes_and_the_command() -> None:
    job = StaleJob(
        "contrast",
        ("results/contrasts/s0-gain.json",),
        ("statistics.n_resamples 1000 -> 1500",),
        ("Table main, s0-gain", "Figure contrasts"),
    )
    said = status_html([job, job], ["config/more.yaml"])
    assert "Out of date." in said and "has 2 job(s) pending" in said
    assert "statistics.n_resamples 1000 -&gt; 1500" in said
    assert "What would change: Figure contrasts, Table main." in said
    assert "snakemake -j 4 paper --configfile config/more.yaml" in said
    assert "Current." in status_html([], []) and "pending" not in status_html([], [])


def test_the_dry_run_is_planned_under_the_build_s_own_profile() -> None:
    assert profile_of(["snakemake", "--report", "r.html", "--profile", "profiles/gpu-host"]) == (
        "profiles/gpu-host"
    )
    assert profile_of(["snakemake", "--profile=profiles/slurm", "--report"]) == "profiles/slurm"
    assert profile_of(["snakemake", "--report", "r.html"]) is None


def test_a_report_after_a_run_says_so_and_plans_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dry run before the build it ends would count that build's own jobs as pending."""

    def no_dry_run(*args: object) -> None:
        raise AssertionError("a report after a run planned a dry run")

    monkeypatch.setattr(report_status, "stale_jobs", no_dry_run)
    argv = ["snakemake", "paper", "--report-after-run", "--report", "r.html"]
    report_status.write_report_status(None, tmp_path, [], argv)  # type: ignore[arg-type]
    said = (tmp_path / paths.REPORT_STATUS).read_text()
    assert "Made right after a build" in said and "pending" not in said
