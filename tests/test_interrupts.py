"""Ctrl-C in the middle of a build: quiet, and one command resumes it to a clean build's
results (issue 30). A terminal sends SIGINT to the whole process group; so does this."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import small_paper_sources, snakemake

pytestmark = pytest.mark.slow
BUILD = ["paper", "-j", "2", "--configfile", "config/small.yaml"]
STEPS = re.compile(r"^(\d+) of (\d+) steps", re.MULTILINE)


def test_an_interrupted_build_is_quiet_and_one_command_resumes_it(
    tmp_path: Path, small_paper: Path
) -> None:
    workdir = small_paper_sources(tmp_path / "paper")
    log = tmp_path / "build.err"
    with log.open("w") as stderr:
        build = subprocess.Popen(
            [sys.executable, "-m", "snakemake", "--directory", str(workdir), *BUILD],
            cwd=workdir, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True,
        )  # fmt: skip
        # Interrupt at about a third of the steps, while jobs run.
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline and build.poll() is None:
            done = STEPS.findall(log.read_text())
            if done and int(done[-1][0]) >= int(done[-1][1]) // 3:
                break
            time.sleep(0.2)
        assert build.poll() is None, "the build ended before it could be interrupted"
        os.killpg(build.pid, signal.SIGINT)
        assert build.wait(timeout=300) != 0
    stderr_text = log.read_text()
    assert "Traceback" not in stderr_text and "KeyboardInterrupt" not in stderr_text
    interrupted = stderr_text.count("skilleval: interrupted by SIGINT")
    failed = stderr_text.count("Error in rule ")
    assert interrupted <= failed or failed == 0, stderr_text[-3000:]

    # The README's recovery: the same command again (the default profile reruns what
    # Snakemake marked incomplete; the journal keeps what was finished).
    snakemake(workdir, *BUILD)
    for table in sorted((small_paper / "paper" / "tables").glob("*.md")):
        resumed = workdir / "paper" / "tables" / table.name
        assert resumed.read_text() == table.read_text(), table.name
    for summary in sorted((small_paper / "results" / "runs").glob("*/results.jsonl")):
        resumed = workdir / summary.relative_to(small_paper)
        assert resumed.read_bytes() == summary.read_bytes(), summary
