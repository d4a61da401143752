"""The report's word on whether it is current, written when `snakemake --report` parses
the workflow: the same dry run `skilleval stale` and `snakemake -n paper` make, so a report
made from results that a config or code change has left behind says so on its front page,
with what is pending and why, instead of showing them as the paper's."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from skilleval import paths
from skilleval.config.model import Config
from skilleval.storage import atomic
from skilleval.workflow.stale import StaleJob, stale_jobs

REPORT_OPTIONS = ("--report", "--report-after-run")
TARGET = "paper"


def report_requested(argv: Sequence[str]) -> bool:
    """Whether Snakemake was asked for its HTML report."""
    return any(word.partition("=")[0] in REPORT_OPTIONS for word in argv[1:])


def status_html(jobs: Sequence[StaleJob], configfiles: Sequence[str]) -> str:
    """The front page's first lines: current, or the jobs `snakemake -n paper` would run."""
    overlays = "".join(f" --configfile {f}" for f in configfiles)
    command = html.escape(f"snakemake -j 4 {TARGET}{overlays}")
    if not jobs:
        return (
            '<p class="skilleval-status current"><b>Current.</b> <code>snakemake -n '
            f"{TARGET}</code> has nothing to do: every number below is what the config and "
            "code give now.</p>"
        )
    items = "".join(
        f"<li><code>{html.escape(job.rule)}</code> {html.escape(', '.join(job.outputs))}: "
        f"{html.escape('; '.join(job.reasons) or 'stale')}</li>"
        for job in jobs
    )
    # A cell is "Table main, s0-gain" or "Figure contrasts": the tables and figures it is in.
    parts = sorted({cell.split(",")[0] for job in jobs for cell in job.cells})
    shown = f" What would change: {html.escape(', '.join(parts))}." if parts else ""
    return (
        '<div class="skilleval-status stale" style="border-left: 4px solid #dc2626; '
        f'padding-left: 0.5rem"><p><b>Out of date.</b> <code>snakemake -n {TARGET}</code> '
        f"has {len(jobs)} job(s) pending, so what this report shows is not what the config "
        f"and code give now.{shown} Build them (<code>{command}</code>) and make the report "
        f"again.</p><details><summary>Pending jobs</summary><ul>{items}</ul></details></div>"
    )


def write_report_status(
    config: Config, root: Path, configfiles: Sequence[str], profile: str | None = None
) -> list[StaleJob]:
    """The dry run's pending jobs, written where report/workflow.rst includes them."""
    jobs = stale_jobs(config, root, configfiles, [TARGET], profile)
    atomic.write_text(root / paths.REPORT_STATUS, status_html(jobs, configfiles))
    return jobs
