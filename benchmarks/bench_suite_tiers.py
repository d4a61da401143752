"""The two test commands a maintainer runs, timed on this machine: the fast tier
(``pytest -m "not slow"``: every unit and seam test, Snakemake started only where the
question is about Snakemake) and the full suite (``pytest``: the end-to-end builds, the
SLURM cluster and Docker engine tests besides). Run from the repository root in the test
venv, with the real server installed (.ci/install-real-server), as the README's test
command leaves it.

Prints each command's wall time and its tests' outcome; asserts nothing. The figures
depend on the interpreter's build and the machine's load (docs/development.md).
SKILLEVAL_BENCH_SIZE=tiny runs both tiers on one small test file only.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TIERS = {"fast tier": ("-m", "not slow"), "full suite": ()}
TINY = os.environ.get("SKILLEVAL_BENCH_SIZE") == "tiny"


def timed(arguments: tuple[str, ...]) -> tuple[float, str]:
    """Wall seconds of ``pytest -q ARGUMENTS`` and its closing line (passed, skipped)."""
    selected = ("-n", "0", "tests/test_paths.py") if TINY else ()
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *arguments]
    started = time.monotonic()
    done = subprocess.run(
        [*command, *selected], cwd=REPO, capture_output=True, text=True, check=False
    )
    wall = time.monotonic() - started
    outcome = re.findall(r"^=*\s*(\d+ passed.*?)\s*=*$", done.stdout, re.M)
    if done.returncode != 0 or not outcome:
        raise SystemExit(f"pytest {' '.join(arguments)} failed:\n{done.stdout[-3000:]}")
    return wall, outcome[-1]


def main() -> None:
    print(f"{os.cpu_count()} cores, {sys.implementation.name} {sys.version.split()[0]}")
    for name, arguments in TIERS.items():
        wall, outcome = timed(arguments)
        shown = " ".join(["pytest", "-q", *(f"'{a}'" if " " in a else a for a in arguments)])
        print(f"{name:<10} {shown:<28} {wall:7.1f} s  ({outcome})")


if __name__ == "__main__":
    main()
