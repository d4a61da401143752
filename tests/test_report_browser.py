"""The report as a reader sees it: `snakemake --report` on the built small paper, opened in
Debian's Chromium (tests/engine_browser.py). Every page it shows, at every size, has no
table cut or covered, no image unloaded and no link that goes nowhere; the landing page
uses the window's width; and a report of a graph out of date says so above its first
table. Each page's screenshot is kept (engine_browser.artifacts). The layout check itself
is shown failing first, on pages built to break each of its rules."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from skilleval.report.front import FRONT_STYLE
from tests.conftest import planned, snakemake
from tests.engine_browser import (
    LAYOUT_PROBLEMS,
    SIZES,
    artifacts,
    chromium,
    missing_browser,
    open_report,
    report_pages,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(missing_browser() is not None, reason=str(missing_browser())),
]
SMALL = ("--configfile", "config/small.yaml")
# A 1x1 PNG, for a page whose image loads.
DOT = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360f80f0000010101005f1bd5a40000000049454e44ae426082"
    )
).decode()


def wide_table(columns: int) -> str:
    head = "".join(f"<th>column {i}</th>" for i in range(columns))
    row = "".join(f"<td>{i}.0000</td>" for i in range(columns))
    return f"<table><tr>{head}</tr><tr>{row}</tr></table>"


def problems_of(page_html: str, width: int = 1280) -> list[str]:
    with chromium() as browser:
        page = browser.new_page(viewport={"width": width, "height": 800})
        page.set_content(page_html)
        problems: list[str] = page.evaluate(LAYOUT_PROBLEMS)
        return problems


def test_the_check_finds_a_table_under_a_figure_a_broken_image_and_a_dead_link() -> None:
    """The front page's old layout: two equal columns, the table wider than its own."""
    columns = '<div style="display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr)">'
    page = (
        f'{columns}<div>{wide_table(30)}</div><div><img src="data:image/png;base64,{DOT}" '
        'style="width:100%;height:200px;background:white"></div></div>'
        '<img alt="gone" src="data:image/png;base64,AAAA"><a href="#nowhere">a chain</a>'
        '<a href="results/runs/base-free/summary.json">a record</a>'
    )
    said = "\n".join(problems_of(page))
    assert "px wider than its box" in said and "<table>" in said and "overlap by" in said
    assert '<img> "gone" did not load' in said
    assert "points to #nowhere, which is not on the page" in said
    assert "points to results/runs/base-free/summary.json, which the report does not" in said


def test_the_check_passes_a_table_that_scrolls_in_its_own_box() -> None:
    """What the front page does with a table wider than the window: it scrolls, reachable."""

    def page(box: str) -> str:
        table = wide_table(40)
        return f'{FRONT_STYLE}<div class="skilleval-front"><div class="{box}">{table}</div>'

    assert problems_of(page("scrolls") + "</div>", width=800) == []
    cut = problems_of(page("") + "</div>", width=800)
    assert "px wider than its box" in "\n".join(cut)


def test_every_page_of_the_report_lays_out_at_every_size(built: Path) -> None:
    snakemake(built, "--report", "report.html", "paper", *SMALL)
    shots = artifacts("report-browser")
    with chromium() as browser:
        seen = list(report_pages(browser, built / "report.html", shots))
        landing = open_report(browser, built / "report.html", SIZES[-1])
        unused = landing.evaluate(
            """() => innerWidth
              - document.querySelector('.skilleval-front').getBoundingClientRect().right"""
        )
    names = {page.name for page in seen}
    assert {"landing", "paper/tables/main.html", "paper/figures/contrasts.png"} <= names
    assert len(seen) == len(names) * len(SIZES) and all(p.screenshot.exists() for p in seen)
    wrong = [f"{p.name} at {p.size[0]}x{p.size[1]}: {x}" for p in seen for x in p.problems]
    assert not wrong, "\n".join(wrong)
    # The landing page takes the window's width, not a narrow column of it.
    assert unused < 0.05 * SIZES[-1][0], f"{unused:.0f} px of the window left empty"


def test_a_report_out_of_date_says_so_above_its_first_table(built: Path) -> None:
    overlay = built / "config" / "more-resamples.yaml"
    overlay.write_text("statistics:\n  n_resamples: 1500\n")
    try:
        both = (*SMALL, str(overlay))  # one --configfile takes both (nargs="+")
        assert [job for job in planned(built, "-n", "paper", *both) if job.outputs]
        snakemake(built, "--report", "report.html", "paper", *both)
    finally:
        overlay.unlink()
    with chromium() as browser:
        page = open_report(browser, built / "report.html", SIZES[0])
        page.screenshot(path=str(artifacts("report-browser") / "out-of-date-1280x800.png"))
        said = page.get_by_text("Out of date.", exact=True)
        assert said.is_visible()
        status, table = said.bounding_box(), page.locator("table").first.bounding_box()
    assert status is not None and table is not None
    assert 0 <= status["y"] < min(table["y"], SIZES[0][1]), (status, table)
