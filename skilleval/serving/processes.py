"""Model-server processes a job owns: a port of its own, a label beside the lease, and
no server outliving its job unnoticed.

The launcher starts sglang in a session of its own so that stopping it reaches all of
sglang's children. A job killed with SIGKILL therefore leaves its server running: the
kernel releases the job's card locks, and the next job would lease the same cards (still
holding the orphan's memory) and, on a shared port, have its health check answered by the
orphan. So each server gets a port from a lease of its own (one lock file per port, as for
cards, and only a port nobody listens on), and a label in the lock directory naming its
run, cards, port, process and owner job. Before leasing, a job stops every labelled server
whose owner is gone; one it may not stop (another user's) keeps its cards out of the lease.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import signal
import socket
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from skilleval.errors import ServiceError
from skilleval.serving.gpu import parse_devices, shared_directory, try_lock
from skilleval.serving.owners import owner_alive, owner_token, process_start

log = logging.getLogger(__name__)
# sglang's ports beside its HTTP port p (sglang 0.5.23): under DP attention on one node
# p + 233 (ZMQ_TCP_PORT_DELTA, the dist-init port) and p + 234 ... p + 239 (the port base
# and five more; srt/server_args.py, PortArgs.init_new), and across nodes a handshake at
# p + 13 (DP_ATTENTION_HANDSHAKE_PORT_DELTA; srt/managers/data_parallel_controller.py).
SGLANG_PORT_OFFSETS = (0, 13, *range(233, 240))
PORT_SLOTS = 64


def sglang_ports(port: int) -> set[int]:
    """Every port an sglang server started on HTTP ``port`` may bind (SGLANG_PORT_OFFSETS)."""
    return {port + offset for offset in SGLANG_PORT_OFFSETS}


def port_stride(offsets: tuple[int, ...], slots: int) -> int:
    """The least distance between the HTTP ports of neighbouring slots at which no two of
    ``slots`` servers share a port: no multiple of it up to slots - 1 is a gap between two
    offsets."""
    gaps = {b - a for a in offsets for b in offsets if b > a}
    return next(
        stride
        for stride in itertools.count(1)
        if not any(k * stride in gaps for k in range(1, slots))
    )


PORT_STRIDE = port_stride(SGLANG_PORT_OFFSETS, PORT_SLOTS)


def port_free(port: int) -> bool:
    """Nobody listens on 127.0.0.1:port (SO_REUSEADDR, as uvicorn binds, so a closed
    connection's TIME_WAIT does not count as in use)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@contextlib.contextmanager
def port_lease(base_port: int, lock_dir: Path) -> Iterator[int]:
    """Hold a port for this job's server: base_port, base_port + PORT_STRIDE, ... (64
    slots), the first whose lock is free and that nobody listens on."""
    directory = shared_directory(lock_dir)
    for slot in range(PORT_SLOTS):
        port = base_port + slot * PORT_STRIDE
        lock = try_lock(directory / f"port-{port}.lock")
        if lock is None:
            continue
        if not port_free(port):
            lock.release()
            log.info("port %d is in use by a process skilleval did not start; next", port)
            continue
        try:
            yield port
        finally:
            lock.release()
        return
    last = base_port + (PORT_SLOTS - 1) * PORT_STRIDE
    raise ServiceError(
        f"no free model-server port among {base_port}, {base_port + PORT_STRIDE}, ... {last} "
        f"(locks in {directory}); stop servers left running, or set "
        "execution.model_server.base_url to another port range"
    )


def served_model_name(run: str, cards: str, port: int) -> str:
    """sglang's --served-model-name for a job's server: it names the run and the lease, so
    a health check tells this job's server from any other. sglang refuses a ':' in it
    (sglang/srt/arg_groups/validation_hook.py)."""
    lease = cards.replace(",", "-") or "none"
    return f"skilleval/{run}/gpu{lease}/port{port}/pid{os.getpid()}"


@dataclass(frozen=True)
class ServerLabel:
    run: str
    cards: str
    port: int
    served_model_name: str
    pid: int
    started: str | None
    owner: str

    @classmethod
    def for_process(cls, run: str, cards: str, port: int, name: str, pid: int) -> ServerLabel:
        return cls(run, cards, port, name, pid, process_start(pid), owner_token())

    def path(self, lock_dir: Path) -> Path:
        return lock_dir / f"server-{self.port}.json"

    def write(self, lock_dir: Path) -> Path:
        path = self.path(lock_dir)
        partial = path.with_suffix(f".{os.getpid()}.partial")
        partial.write_text(json.dumps(asdict(self), indent=2))
        os.chmod(partial, 0o644)
        partial.replace(path)
        return path

    def server_alive(self) -> bool:
        return self.started is not None and process_start(self.pid) == self.started


def read_labels(lock_dir: Path) -> list[tuple[Path, ServerLabel]]:
    labels = []
    for path in sorted(lock_dir.glob("server-*.json")):
        with contextlib.suppress(OSError, ValueError, TypeError):
            labels.append((path, ServerLabel(**json.loads(path.read_text()))))
    return labels


def orphans(lock_dir: Path, run: str | None = None) -> list[tuple[Path, ServerLabel]]:
    """Labelled servers whose owner job is gone (only ``run``'s, if given)."""
    if not lock_dir.is_dir():
        return []
    return [
        (path, label)
        for path, label in read_labels(lock_dir)
        if not owner_alive(label.owner) and run in (None, label.run)
    ]


def stop_orphans(lock_dir: Path, run: str | None = None, grace_s: float = 30.0) -> list[int]:
    """Stop every labelled server whose owner job is gone (only ``run``'s, if given); the
    cards of those this user may not stop (another user's), which no lease may hand out
    while they run."""
    occupied: list[int] = []
    for path, label in orphans(lock_dir, run):
        if label.server_alive():
            log.warning(
                "stopping model server pid %d (port %d, cards %s) left by run %s: its owner %s "
                "is gone",
                label.pid,
                label.port,
                label.cards,
                label.run,
                label.owner,
            )
            try:
                stop_group(label.pid, label.started, grace_s)
            except PermissionError:
                log.warning(
                    "may not stop pid %d (another user's); its cards %s stay out of leases",
                    label.pid,
                    label.cards,
                )
                occupied += parse_devices(label.cards)
                continue
        with contextlib.suppress(OSError):
            path.unlink()
    return occupied


def stop_group(pid: int, started: str | None, grace_s: float) -> None:
    """SIGTERM a server's process group (its own session), SIGKILL it after ``grace_s``;
    returns once the process is gone (not ours to reap: polled by its start time)."""

    def running() -> bool:
        return process_start(pid) == started

    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, sig)
        deadline = time.monotonic() + wait_s
        while running() and time.monotonic() < deadline:
            time.sleep(0.1)
        if not running():
            return
    raise ServiceError(f"model server pid {pid} survived SIGKILL; stop it by hand")
