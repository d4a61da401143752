"""The report's word on whether it is current (workflow.report_status), without a build:
a report made from a graph with pending jobs says so, naming them and the command."""

from __future__ import annotations

from skilleval.workflow.report_status import report_requested, status_html
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
