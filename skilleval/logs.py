"""Logging for rule scripts: everything to the job's log file, user errors without traceback,
and quiet interrupts.

Ctrl-C in a terminal signals the whole process group, so every running rule script gets
it; Python's default (KeyboardInterrupt, or death by SIGTERM) prints a traceback from
whatever each script was doing. Here both signals raise ``Interrupted``, a SystemExit with
the shell's code (128 + the signal), which the job's log context notes in one line; Python
prints no traceback for a SystemExit.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import IO, Any

from skilleval.errors import SkillevalError

SIGNALS = (signal.SIGINT, signal.SIGTERM)
# Where Snakemake writes a rule's script before running it with Python (snakemake/script
# /__init__.py: ScriptBase writes it under the persistence's script_path).
RULE_SCRIPT_DIR = "/.snakemake/scripts/"


# The user's own build command, set by the Snakefile in the process the user started and
# inherited by every job it runs (locally or, with the environment exported, on a cluster).
BUILD_COMMAND_VARIABLE = "SKILLEVAL_BUILD_COMMAND"


def record_build_command(argv: list[str]) -> None:
    """Note the command that started the build, once: jobs re-read the Snakefile in their
    own processes, whose arguments are Snakemake's, not the user's."""
    if BUILD_COMMAND_VARIABLE not in os.environ and argv:
        os.environ[BUILD_COMMAND_VARIABLE] = shlex.join(["snakemake", *argv[1:]])


# The rules a build can be asked for by name, set by the Snakefile for the messages of
# the build's own process (a target that names no rule).
RULE_TARGETS_VARIABLE = "SKILLEVAL_RULE_TARGETS"


def record_rule_targets(names: list[str]) -> None:
    os.environ[RULE_TARGETS_VARIABLE] = " ".join(names)


def rule_targets() -> list[str]:
    return os.environ.get(RULE_TARGETS_VARIABLE, "").split()


# The package the Snakefile imported, set at parse time for every job the build runs.
PACKAGE_VARIABLE = "SKILLEVAL_PACKAGE_DIR"
PACKAGE_DIR = Path(__file__).resolve().parent
FIX_PACKAGE = "fix: run pip install -e . in {checkout} (or use the venv installed from it)"


def package_for_build(workflow_dir: str) -> str | None:
    """Have every job of this build import the package the Snakefile imported, and say why
    the build would run another checkout's code (or None). A job runs its script with the
    script's folder first on the path, not the workflow's, so a package found through the
    working directory (python -m snakemake) is put on the jobs' PYTHONPATH. A workflow
    folder that holds its own skilleval package (a checkout) must import that package: the
    graph's staleness is the imported code's, and so is every job's. A folder with the
    workflow only uses the installed package."""
    if PACKAGE_VARIABLE not in os.environ:
        os.environ[PACKAGE_VARIABLE] = str(PACKAGE_DIR)
        if PACKAGE_DIR.parent.name not in ("site-packages", "dist-packages"):  # a source tree
            inherited = os.environ.get("PYTHONPATH")
            paths = [str(PACKAGE_DIR.parent), *([inherited] if inherited else [])]
            os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    own = Path(workflow_dir).resolve() / "skilleval"
    if (own / "__init__.py").is_file() and own != PACKAGE_DIR:
        return (
            f"this checkout's workflow ({own.parent}) imports the skilleval package of "
            f"another checkout ({PACKAGE_DIR}): its staleness and its jobs would be that "
            f"code's; {FIX_PACKAGE.format(checkout=own.parent)}"
        )
    return None


def job_package_problem() -> str | None:
    """Why this job would run other code than its build parsed the graph with, or None."""
    parsed = os.environ.get(PACKAGE_VARIABLE)
    if parsed and Path(parsed) != PACKAGE_DIR:
        return (
            f"this job imports the skilleval package at {PACKAGE_DIR}, but its build parsed "
            f"the graph with {parsed}; {FIX_PACKAGE.format(checkout=Path(parsed).parent)}"
        )
    return None


def resume_command(target: str) -> str:
    """The command that resumes a stopped job: the user's own build command, with its
    config files, profile and targets; a bare one for the target where none is known."""
    return os.environ.get(BUILD_COMMAND_VARIABLE) or f"snakemake --cores 1 {target}"


class Interrupted(SystemExit):
    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signal_name = signal.Signals(signum).name


# The signals received so far: a library may catch the Interrupted raised inside it and
# raise its own error instead (pydantic-core wraps it in a SchemaError while it builds a
# validator), and the job must still end as interrupted.
RECEIVED: list[int] = []


def _raise_interrupted(signum: int, _frame: FrameType | None) -> None:
    RECEIVED.append(signum)
    raise Interrupted(signum)


def as_interrupt(error: BaseException) -> Interrupted | None:
    """``error`` as the interrupt it is or stands for; None when no signal came."""
    if isinstance(error, Interrupted):
        return error
    return Interrupted(RECEIVED[0]) if RECEIVED else None


def quiet_interrupts() -> None:
    """SIGINT and SIGTERM raise Interrupted from now on (the main thread only can)."""
    if threading.current_thread() is threading.main_thread():
        for signum in SIGNALS:
            signal.signal(signum, _raise_interrupted)


def is_rule_script() -> bool:
    return bool(sys.argv) and RULE_SCRIPT_DIR in sys.argv[0]


# Libraries that log every connection or request below WARNING (urllib3, the HTTP client of
# serving.http and of the docker SDK): one line per request would bury a run's progress
# lines. Their warnings still show.
CHATTY_LIBRARIES = frozenset({"docker", "urllib3"})


def quiet_libraries(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.WARNING or record.name.split(".")[0] not in CHATTY_LIBRARIES


def _files(files: Any) -> str:
    names = [str(f) for f in files]
    return f"{len(names)} file(s)" + (": " + ", ".join(names) if names else "")


class WholeLines:
    """A text stream that passes each line on in one write. Python's stderr writes through,
    so ``print`` and Snakemake's handler send a line's text and its newline as two writes,
    and the jobs and Snakemake share that terminal: two lines could splice into one."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._partial = ""

    def write(self, text: str) -> int:
        whole, newline, self._partial = (self._partial + text).rpartition("\n")
        if newline:
            self._stream.write(whole + newline)
        return len(text)

    def flush(self) -> None:
        if self._partial:
            self._stream.write(self._partial)
            self._partial = ""
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()


def to_terminal(line: str) -> None:
    """``line`` on the process's own stderr (``sys.__stderr__``, which a job's log redirect
    leaves as the build's terminal), in one write."""
    if sys.__stderr__ is not None:
        sys.__stderr__.write(f"skilleval: {line}\n")
        sys.__stderr__.flush()


def also_to_terminal(line: str) -> None:
    """A line on the build's terminal as well as in the job's log (where the log is not
    the terminal already)."""
    if sys.stderr is not sys.__stderr__:
        to_terminal(line)


@contextlib.contextmanager
def logged(path: str, job: Any = None, level: int = logging.INFO) -> Iterator[logging.Logger]:
    """Send logging and stderr to ``path``; a SkillevalError ends the job with one clear line.
    With ``job`` (a rule script's ``snakemake`` object) the log opens with the rule, what it
    reads and what it writes, and closes with what it wrote: no job leaves an empty log."""
    with open(path, "a", buffering=1) as handle, contextlib.redirect_stderr(handle):
        handler = logging.StreamHandler(handle)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        root = logging.getLogger()
        root.addHandler(handler)
        handler.addFilter(quiet_libraries)
        root.setLevel(level)
        if job is not None:
            wildcards = ", ".join(f"{k}={v}" for k, v in dict(job.wildcards).items())
            root.info("start: rule %s%s", job.rule, f" ({wildcards})" if wildcards else "")
            root.info("reads %s", _files(job.input))
            root.info("writes %s", _files(job.output))
        try:
            if job is not None and (problem := job_package_problem()):
                raise SkillevalError(problem)
            yield root
            if job is not None:
                root.info("done: wrote %s", _files(f for f in job.output if Path(f).exists()))
        except SkillevalError as error:
            root.error("%s", error)
            to_terminal(f"{error} (log: {path})")
            raise SystemExit(1) from None
        except BaseException as error:
            interrupt = as_interrupt(error)
            if interrupt is None:
                root.exception("job failed")
                raise
            root.warning(
                "interrupted by %s; a re-run resumes from what is kept", interrupt.signal_name
            )
            if job is None:  # a build's logger plugin names each stopped job itself
                to_terminal(f"interrupted by {interrupt.signal_name} (log: {path})")
            if interrupt is error:
                raise
            raise interrupt from None
        finally:
            root.removeHandler(handler)
