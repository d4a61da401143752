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

REPORT = "--report"
# A report made after the build it ends: its currency is that build's, known only then.
AFTER_RUN = "--report-after-run"
TARGET = "paper"


def report_requested(argv: Sequence[str]) -> bool:
    """Whether Snakemake was asked for its HTML report."""
    return any(word.partition("=")[0] in (REPORT, AFTER_RUN) for word in argv[1:])


def profile_of(argv: Sequence[str]) -> str | None:
    """The --profile the build was given: its config (backends) is part of what is planned."""
    for index, word in enumerate(argv[1:], 1):
        option, _, value = word.partition("=")
        if option == "--profile":
            return value or (argv[index + 1] if index + 1 < len(argv) else None)
    return None


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


AFTER_RUN_HTML = (
    '<p class="skilleval-status"><b>Made right after a build</b> '
    f"(<code>{AFTER_RUN}</code>): it shows what that build made; <code>snakemake -n "
    f"{TARGET}</code> says whether the whole paper is current.</p>"
)


def write_report_status(
    config: Config, root: Path, configfiles: Sequence[str], argv: Sequence[str]
) -> None:
    """The dry run's pending jobs (under the build's own profile), written where
    report/workflow.rst includes them; a report made after a run says so instead, as a dry
    run now would count the jobs that run is about to do."""
    if any(word.partition("=")[0] == AFTER_RUN for word in argv[1:]):
        atomic.write_text(root / paths.REPORT_STATUS, AFTER_RUN_HTML)
        return
    jobs = stale_jobs(config, root, configfiles, [TARGET], profile_of(argv))
    atomic.write_text(root / paths.REPORT_STATUS, status_html(jobs, configfiles))
