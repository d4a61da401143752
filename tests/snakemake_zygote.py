"""`python -m snakemake` without paying for Snakemake's import on every call.

Each start of Snakemake spends about a second importing it before it reads a workflow
(2 cores: 1.0 s of a 1.4 s refused dry run), and the suite starts it hundreds of times.
A zygote process imports and sets up once what every call does first (``preload``); for
each call it forks a child that does what ``python -m MODULE ARGS`` does for snakemake,
or for ``skilleval.cli``, which drives Snakemake's API (snakemake/__main__.py calls
``snakemake.cli.main``, which reads ``sys.argv[1:]`` and exits with its status) in the
caller's working directory and environment, with ``sys.path[0]`` set to that directory as
``-m`` sets it (a workflow copy imports its own copy of skilleval), and its stdout and
stderr written to files. The zygote imports nothing of skilleval, so no child inherits a
module a workflow would import.

Run as a script, this file is the zygote; ``SnakemakeZygote`` is the caller's side.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import runpy
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path
from typing import Any, NoReturn

START_PROCESS = subprocess.run


def call(module: str, cwd: str, args: list[str], folder: Path) -> dict[str, Any]:
    """The request for ``python -m MODULE ARGS`` in ``cwd`` with this process's environment,
    its stdout and stderr going to files in ``folder``."""
    streams = {"stdout": str(folder / "stdout"), "stderr": str(folder / "stderr")}
    return {"module": module, "cwd": cwd, "args": args, "env": dict(os.environ), **streams}


def completed(
    command: list[str], returncode: int, request: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    """A finished request as subprocess.run returns it. A child that failed before it
    opened its files (its folder gone) wrote none: its output is empty, its status stays."""
    printed = [
        Path(request[s]).read_text() if Path(request[s]).exists() else ""
        for s in ("stdout", "stderr")
    ]
    return subprocess.CompletedProcess(command, returncode, *printed)


def run_module(request: dict[str, Any]) -> int:
    """In the forked child: ``python -m MODULE ARGS`` as the request describes; its status.
    The module is snakemake or one that imports it (skilleval.cli), run as ``-m`` runs it."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[0] = request["cwd"]
    streams = ((0, os.devnull, os.O_RDONLY), (1, request["stdout"], os.O_WRONLY | os.O_CREAT))
    for fd, path, flags in (*streams, (2, request["stderr"], os.O_WRONLY | os.O_CREAT)):
        handle = os.open(path, flags, 0o644)
        os.dup2(handle, fd)
        os.close(handle)
    sys.argv = ["-m", *request["args"]]  # run_module puts the module's file first
    start_python_modules_by_fork()
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    except SystemExit as exit:
        # as the interpreter ends on an uncaught SystemExit (the Snakefile's refusals are
        # sys.exit(message)): a message goes to stderr and the status is 1
        if exit.code is None or isinstance(exit.code, int):
            return exit.code or 0
        print(exit.code, file=sys.stderr)
        return 1
    return 0


def start_python_modules_by_fork() -> None:
    """In a child: a ``subprocess.run([sys.executable, "-m", MODULE, ...])`` that captures
    its output as text (skilleval stale's dry run: provenance/planned.py) forks this child
    again instead of starting a Python that imports Snakemake anew; any other command, or
    one run in another folder (whose skilleval this child has not imported), starts as it
    would. tests/test_workflow_e2e.py runs skilleval stale as a process of its own."""

    def run(command: Any, *args: Any, **kwargs: Any) -> Any:
        own = {"cwd", "capture_output", "text", "timeout", "check"}
        forkable = (
            not args
            and isinstance(command, list)
            and command[:2] == [sys.executable, "-m"]
            and set(kwargs) <= own
            and kwargs.get("capture_output") is True
            and kwargs.get("text") is True
            and Path(kwargs.get("cwd") or ".").resolve() == Path(sys.path[0]).resolve()
        )
        if not forkable:
            return START_PROCESS(command, *args, **kwargs)
        return run_forked(command, kwargs.get("timeout"), bool(kwargs.get("check")))

    subprocess.run = run  # type: ignore[assignment]


def run_forked(
    command: list[str], timeout: float | None, check: bool
) -> subprocess.CompletedProcess[str]:
    # mkdtemp, not TemporaryDirectory: the fork inherits the exit handlers of this process's
    # finalizers, and would remove the folder it writes to as it ends
    folder = Path(tempfile.mkdtemp(prefix="snakemake-call-"))
    request = call(command[2], sys.path[0], command[3:], folder)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        run_child(request)
    try:
        done = completed(command, wait_for(pid, timeout, command), request)
    finally:
        shutil.rmtree(folder)
    if check:
        done.check_returncode()
    return done


def wait_for(pid: int, timeout: float | None, command: list[str]) -> int:
    """The exit status of a forked child, which is killed past ``timeout``, as
    subprocess.run kills its process."""
    exited = os.pidfd_open(pid)
    try:
        ready, _, _ = select.select([exited], [], [], timeout)
    finally:
        os.close(exited)
    if not ready:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise subprocess.TimeoutExpired(command, timeout or 0)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def serve() -> None:
    sys.path[0] = os.getcwd()  # not this file's folder: a test module must shadow nothing
    preload()
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            run_child(request)
        _, wait_status = os.waitpid(pid, 0)
        print(json.dumps({"returncode": os.waitstatus_to_exitcode(wait_status)}), flush=True)


def preload() -> None:
    """Import and set up once what every child would: Snakemake's CLI, API and scheduler,
    smart_open (its source cache opens the Snakefile through it), and every plugin registry
    but the loggers' (a registry is a singleton that collects its plugins once, importing
    them: the loggers' imports skilleval). Then freeze what exists into the collector's
    permanent generation, as the gc docs advise before fork without exec: a child's
    collections then never walk, and so never copy, the zygote's objects."""
    import smart_open  # noqa: F401
    import snakemake.api
    import snakemake.cli
    import snakemake.scheduling.job_scheduler  # noqa: F401
    from snakemake_interface_executor_plugins.registry import ExecutorPluginRegistry
    from snakemake_interface_report_plugins.registry import ReportPluginRegistry
    from snakemake_interface_scheduler_plugins.registry import SchedulerPluginRegistry
    from snakemake_interface_storage_plugins.registry import StoragePluginRegistry

    for registry in (
        ExecutorPluginRegistry,
        ReportPluginRegistry,
        SchedulerPluginRegistry,
        StoragePluginRegistry,
    ):
        registry()
    # A child must import the caller's skilleval (a workflow copy's own), never inherit one.
    inherited = sorted(m for m in sys.modules if m.split(".")[0] == "skilleval")
    assert not inherited, f"the zygote's imports imported {inherited}"
    gc.freeze()


def run_child(request: dict[str, Any]) -> NoReturn:
    """A forked child's whole life: it never returns into the code that forked it, even on
    an exception no module caught (which ends it as the interpreter would: traceback, 1)."""
    try:
        status = run_module(request)
    except BaseException:  # printed, and the status says the call failed
        traceback.print_exc()
        status = 1
    exit_as_the_interpreter_does(status)


def exit_as_the_interpreter_does(status: int) -> NoReturn:
    """End the child with what an exit shows: non-daemon threads joined (and the pools'
    exit hooks run), exit handlers run (Snakemake's temporary folders go through
    weakref.finalize's handler, logging flushes its files), stdout and stderr flushed; but
    none of the teardown of every module, which the next fork would redo for nothing and
    which costs a refused dry run a third of its time. multiprocessing ends its forked
    children with os._exit the same way (multiprocessing/popen_fork.py)."""
    threading._shutdown()  # type: ignore[attr-defined]  # what Py_FinalizeEx calls first
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


class SnakemakeZygote:
    """The caller's side: ``run`` is ``subprocess.run([python, -m, snakemake, *args])``
    with output captured as text; a call past its timeout kills the zygote and its child
    and raises ``subprocess.TimeoutExpired``, and the next call starts a new zygote."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[str] | None = None

    def run(
        self, cwd: Path, args: list[str], timeout: float, module: str = "snakemake"
    ) -> subprocess.CompletedProcess[str]:
        if self.process is None or self.process.poll() is not None:
            self.process = subprocess.Popen(
                [sys.executable, __file__],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        assert self.process.stdin is not None and self.process.stdout is not None
        with tempfile.TemporaryDirectory(prefix="snakemake-call-") as folder:
            request = call(module, str(cwd), args, Path(folder))
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            ready, _, _ = select.select([self.process.stdout], [], [], timeout)
            if not ready:
                self.stop()
                raise subprocess.TimeoutExpired([module, *args], timeout)
            line = self.process.stdout.readline()
            if not line:
                self.stop()
                raise AssertionError(f"the Snakemake zygote exited; {module} {args} has no status")
            return completed([module, *args], json.loads(line)["returncode"], request)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.process = None


if __name__ == "__main__":
    serve()
