"""Debian's Chromium, driven headless by Playwright, reading a Snakemake report as a person
does: the landing page, then every result the report can show, each opened as the report's
own view button opens it (``ButtonViewManager`` in Snakemake's
report/html_reporter/template/components/result_view_button.js). In each page and in each
result's frame, tests/data/layout_problems.js measures what a reader cannot see or reach.
Playwright's own browser download cannot run here, so it starts the system's Chromium."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"
LAYOUT_PROBLEMS = (DATA / "layout_problems.js").read_text()
# Snakemake's views by a result's file type (getResultMimeType in its components/common.js);
# every other type is a download, not a page.
VIEWS = {".html": "html", ".png": "img", ".svg": "img", ".jpg": "img", ".jpeg": "img"}
# Without the background services Chromium opens connections this machine refuses, many at
# a time; as root it needs --no-sandbox.
FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
SIZES = ((1280, 800), (1920, 1080))


def missing_browser() -> str | None:
    if shutil.which("chromium") is None:
        return "Chromium is not installed: .ci/install-engines installs Debian's chromium as root"
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "Playwright is missing: pip install -e '.[dev]'"
    return None


@dataclass(frozen=True)
class SeenPage:
    """One page of the report as the browser laid it out at one size."""

    name: str
    size: tuple[int, int]
    problems: list[str]
    screenshot: Path


@contextmanager
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=shutil.which("chromium"), args=FLAGS)
        try:
            yield browser
        finally:
            browser.close()


def artifacts(name: str) -> Path:
    """Where a test keeps what it saw: SKILLEVAL_TEST_ARTIFACTS, else test-artifacts/ at the
    repository's root (ignored by git)."""
    root = os.environ.get("SKILLEVAL_TEST_ARTIFACTS") or DATA.parent.parent / "test-artifacts"
    folder = Path(root) / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def open_report(browser: Any, report: Path, size: tuple[int, int]) -> Any:
    page = browser.new_page(viewport={"width": size[0], "height": size[1]})
    page.goto(report.resolve().as_uri())
    page.wait_for_function("typeof app !== 'undefined' && typeof results !== 'undefined'")
    page.wait_for_load_state("load")
    return page


def report_pages(browser: Any, report: Path, shots: Path) -> Iterator[SeenPage]:
    """The landing page and every result the report shows, at each of SIZES."""
    for size in SIZES:
        page = open_report(browser, report, size)
        try:
            yield seen(page, page, "landing", size, shots)
            for result in page.evaluate("Object.keys(results)"):
                view = VIEWS.get(Path(result).suffix.lower())
                if view is not None:
                    yield shown_result(page, result, view, size, shots)
        finally:
            page.close()


def shown_result(page: Any, result: str, view: str, size: tuple[int, int], shots: Path) -> Any:
    page.evaluate(
        """([result, view]) => app.setView(
            {content: view, contentPath: results[result].data_uri, resultPath: result})""",
        [result, view],
    )
    if view == "html":
        frame = page.wait_for_selector("iframe").content_frame()
        frame.wait_for_load_state("load")
        return seen(page, frame, result, size, shots)
    page.wait_for_selector(f'img[src="{page.evaluate("r => results[r].data_uri", result)}"]')
    page.wait_for_load_state("load")
    return seen(page, page, result, size, shots)


def seen(page: Any, document: Any, name: str, size: tuple[int, int], shots: Path) -> SeenPage:
    """The page as it opens (its screenshot), measured with every <details> opened too: the
    records behind each row sit in closed ones until the reader opens them."""
    screenshot = shots / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}-{size[0]}x{size[1]}.png"
    page.screenshot(path=str(screenshot))
    problems = document.evaluate(LAYOUT_PROBLEMS)
    document.evaluate("() => document.querySelectorAll('details').forEach(d => d.open = true)")
    opened = [p for p in document.evaluate(LAYOUT_PROBLEMS) if p not in problems]
    problems += [f"with its details open, {p}" for p in opened]
    return SeenPage(name, size, problems, screenshot)
