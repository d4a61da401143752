"""Every code block of the two bring-your-own guides, run in order as a lab would, in a copy
of the built small paper (issue: the seams hold; docs that run).

A ```bash block's commands run as written, each required to succeed; one ending in ``&``
keeps running in the background until the guide is done. A ```yaml block preceded by
``<!-- file: PATH -->`` is written to PATH. Three things differ from the page, each so
that the suite can run it beside other tests: every ``--configfile`` list starts with
``config/small.yaml`` (the small world), the servers' ports 5700 and 30000 become free
ones, and ``pip`` is the test venv's own install (the README's test command installs
tests/data/lab_env).
"""

from __future__ import annotations

import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow

GUIDES = ("docs/bring-your-own-environment.md", "docs/bring-your-own-trainer.md")
BLOCK = re.compile(r"(?:<!-- file: (\S+) -->\n)?```(\w*)\n(.*?)```", re.S)
INSTALLED_BY_THE_TEST_COMMAND = {"pip install -e tests/data/lab_env"}


def blocks(guide: str) -> list[tuple[str | None, str, str]]:
    """(file, language, text) of every fenced block of ``guide``, in order."""
    return [(m[1], m[2], m[3]) for m in BLOCK.finditer((REPO / guide).read_text())]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def commands(text: str) -> Iterator[tuple[list[str], bool]]:
    """Each command of a bash block, split at &&, and whether it runs in the background."""
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        while words:
            end = words.index("&&") if "&&" in words else len(words)
            command, words = words[:end], words[end + 1 :]
            background = bool(command) and command[-1] == "&"
            yield (command[:-1] if background else command), background


def as_run(words: list[str], ports: dict[str, str]) -> list[str]:
    words = [ports.get(word, word) for word in words]
    if "--configfile" in words:
        at = words.index("--configfile") + 1
        words.insert(at, "config/small.yaml")
    tool = shutil.which(words[0]) if words[0] != "snakemake" else None
    if words[0] == "snakemake":
        return [sys.executable, "-m", "snakemake", *words[1:]]
    assert tool is not None, f"{words[0]} is not installed in the test venv"
    return [tool, *words[1:]]


def with_ports(text: str, ports: dict[str, str]) -> str:
    for default, free in ports.items():
        text = text.replace(f":{default}", f":{free}")
    return text


def test_every_guide_block_is_run_or_written() -> None:
    """No block is left out of the run below: each is bash or names its file."""
    for guide in GUIDES:
        for file, language, text in blocks(guide):
            assert language == "bash" or (language == "yaml" and file), (guide, text)


def test_the_guides_run_as_written(small_paper: Path) -> None:
    workdir = small_paper
    ports = {"5700": str(free_port()), "30000": str(free_port())}
    flags = {"5700": "--env-port", "30000": "--port"}
    background: list[subprocess.Popen[bytes]] = []
    try:
        for guide in GUIDES:
            for file, _language, text in blocks(guide):
                if file is not None:
                    (workdir / file).write_text(with_ports(text, ports))
                    continue
                for words, in_background in commands(text):
                    if shlex.join(words) in INSTALLED_BY_THE_TEST_COMMAND:
                        continue
                    argv = as_run(words, ports)
                    if in_background:
                        if words[:2] == ["skilleval", "serve-world"]:
                            argv += [arg for p, f in flags.items() for arg in (f, ports[p])]
                        background.append(subprocess.Popen(argv, cwd=workdir))
                        continue
                    done = subprocess.run(
                        argv, cwd=workdir, capture_output=True, text=True, timeout=600
                    )
                    said = f"{guide}: {shlex.join(words)}\n{done.stdout}\n{done.stderr}"
                    assert done.returncode == 0, said
                    assert "Traceback" not in done.stderr, said
    finally:
        for process in background:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=30)
    summary = (workdir / "results/runs/base-S0/summary.json").read_text()
    assert '"policy": "openai"' in summary and '"environment": "lab-shop"' in summary
