"""GPU leases: concrete device ids for jobs that Snakemake only counts.

Snakemake's ``resources: gpu=N`` caps how many cards run at once but never says which
(snakemake issue #281). A job leases N ids from the host's allowed set by taking one file
lock per card (filelock's FileLock, an flock on Unix: filelock/_unix.py); the kernel drops
the locks when the process dies, even on SIGKILL, so a killed job never leaks a card.
The allowed set comes from the profile (resource ``gpu_devices``), never from config, and
the protected card (GPU 0) is simply absent.

Every job of the workflow starts with no visible card (``job_environment``, applied once
when the Snakefile is parsed, so every rule and every executor inherits it); only a lease
makes cards visible, and only to the process it starts. Card numbers are nvidia-smi's:
CUDA's own default order is fastest first (CUDA_DEVICE_ORDER=FASTEST_FIRST, CUDA C
Programming Guide, "CUDA Environment Variables"), under which the card a job calls 0 need
not be the protected one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from skilleval.errors import GpuLeaseError, locate
from skilleval.protocol.sections import Served
from skilleval.serving.probe import query_gpus
from skilleval.storage.records import Record

if TYPE_CHECKING:
    from filelock import FileLock

log = logging.getLogger(__name__)
DEFAULT_LOCK_DIR = "/tmp/skilleval-gpu-locks"
LOCK_DIR_VARIABLE = "SKILLEVAL_GPU_LOCK_DIR"
# The cards SLURM gave this job, as "JOBID=ids": kept aside before job_environment hides
# them, so the job's lease still finds them (the job id tells a parent allocation's apart).
SCHEDULER_CARDS_VARIABLE = "SKILLEVAL_SCHEDULER_CARDS"


def lock_directory() -> Path:
    """The host's lease directory: SKILLEVAL_GPU_LOCK_DIR, else /tmp/skilleval-gpu-locks."""
    return Path(os.environ.get(LOCK_DIR_VARIABLE) or DEFAULT_LOCK_DIR)


def job_environment(environ: MutableMapping[str, str] = os.environ) -> None:
    """What every job of the workflow starts with: no visible CUDA device, and cards
    numbered by PCI bus id as nvidia-smi numbers them. Inside a SLURM job the cards the
    scheduler assigned are kept aside for that job's lease first."""
    environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    job = environ.get("SLURM_JOB_ID")
    assigned = environ.get("CUDA_VISIBLE_DEVICES")
    if job and assigned and not environ.get(SCHEDULER_CARDS_VARIABLE, "").startswith(f"{job}="):
        environ[SCHEDULER_CARDS_VARIABLE] = f"{job}={assigned}"
    environ["CUDA_VISIBLE_DEVICES"] = ""


def shared_directory(path: Path) -> Path:
    """``path``, created usable by every user of the host: world-writable, so a second
    user's job can lease from it. Not sticky: under a sticky directory filelock refuses a
    lock file owned by anyone but the caller or the directory's owner (filelock 4.3,
    _filesystem/_ownership.py ``foreign_owner``), which would keep a third user off every
    card another user leased first. skilleval never removes a lock file. A directory someone
    else made is left as its owner set it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.mkdir()
    except FileExistsError:
        return path
    os.chmod(path, 0o777)
    return path


def parse_devices(spec: str | Sequence[int] | None) -> list[int]:
    """'1,2,3' or '1-13' or [1, 2] -> sorted unique ids."""
    if spec is None or spec == "":
        return []
    if not isinstance(spec, str):
        return sorted({int(x) for x in spec})
    ids: set[int] = set()
    for part in spec.split(","):
        part = part.strip()
        if "-" in part:
            low, high = part.split("-")
            ids.update(range(int(low), int(high) + 1))
        elif part:
            ids.add(int(part))
    return sorted(ids)


@dataclass(frozen=True)
class GpuLease:
    devices: tuple[int, ...]
    acquired_at: float
    waited_s: float

    @property
    def visible_devices(self) -> str:
        return ",".join(map(str, self.devices))

    def as_json(self) -> dict[str, object]:
        return {
            "devices": list(self.devices),
            "CUDA_VISIBLE_DEVICES": self.visible_devices,
            "acquired_at": self.acquired_at,
            "waited_s": round(self.waited_s, 3),
        }


class LeaseRecord(Record):
    """What ``skilleval gpu-run --record`` keeps: the lease, the command and how it ended."""

    kind = "gpu_lease"
    devices: list[int]
    CUDA_VISIBLE_DEVICES: str
    acquired_at: float
    waited_s: float
    command: list[str]
    pid: int
    started: float
    ended: float
    returncode: int


def try_lock(path: Path) -> FileLock | None:
    """The lock at ``path`` if nobody holds it, else None. Readable and writable by every
    user (mode 0o666, set past the creator's umask), so any job of the host can lease it."""
    # Imported here: the workflow imports this module while Snakemake parses it, where
    # filelock (10-15 ms) would be paid by every snakemake start for no lease.
    from filelock import FileLock, Timeout

    lock = FileLock(path, mode=0o666, timeout=0, thread_local=False)
    try:
        lock.acquire()
    except Timeout:
        return None
    except PermissionError as error:
        raise GpuLeaseError(
            f"cannot take the lock {path} ({error.strerror or error}); another user made it "
            f"or its directory unusable to this one: ask them to run chmod a+rw {path} and "
            f"chmod -t {path.parent}, or set {LOCK_DIR_VARIABLE} to a directory every user "
            "of this host can write"
        ) from error
    return lock


@contextlib.contextmanager
def gpu_lease(
    count: int,
    allowed: Sequence[int],
    lock_dir: str | Path | None = None,
    timeout_s: float = 3600.0,
    poll_s: float = 0.2,
    protected: Sequence[int] = (0,),
    occupied: Sequence[int] = (),
) -> Iterator[GpuLease]:
    """Hold ``count`` cards from ``allowed`` (never a protected one) for the with-block;
    ``occupied`` cards (a server nobody owns still runs there) are waited out."""
    usable = [d for d in allowed if d not in set(protected)]
    if count > len(usable):
        raise GpuLeaseError(
            f"job asks for {count} GPU(s) but the host allows {len(usable)} "
            f"({usable}; protected {list(protected)}); lower the job's gpu resource"
        )
    if count <= 0:
        yield GpuLease((), time.time(), 0.0)
        return
    directory = shared_directory(Path(lock_dir) if lock_dir else lock_directory())
    start = time.monotonic()
    held: dict[int, FileLock] = {}
    try:
        while True:
            for device in usable:
                if len(held) == count:
                    break
                if device not in held and device not in occupied:
                    lock = try_lock(directory / f"gpu-{device}.lock")
                    if lock is not None:
                        held[device] = lock
            if len(held) == count:
                break
            if time.monotonic() - start > timeout_s:
                raise GpuLeaseError(
                    f"no {count} free GPU(s) among {usable} after {timeout_s:.0f}s "
                    f"(holding {sorted(held)}); locks in {directory}"
                )
            time.sleep(poll_s)
        lease = GpuLease(tuple(sorted(held)), time.time(), time.monotonic() - start)
        log.info("GPU lease: devices %s after %.2fs", lease.visible_devices, lease.waited_s)
        yield lease
    finally:
        for lock in held.values():
            lock.release()


@contextlib.contextmanager
def visible_devices(lease: GpuLease) -> Iterator[None]:
    """Export CUDA_VISIBLE_DEVICES for the with-block (and for child processes)."""
    previous = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = lease.visible_devices
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = previous


def allowed_devices() -> tuple[list[int], list[int]]:
    """(allowed, protected) on a GPU host: the profile's gpu_devices resource (exported as
    SKILLEVAL_GPU_DEVICES) lists the cards jobs may lease; GPU 0 stays protected."""
    return parse_devices(os.environ.get("SKILLEVAL_GPU_DEVICES", "")), [0]


def scheduler_cards() -> list[int] | None:
    """The cards a scheduler (SLURM) assigned to this job, or None outside one.

    SLURM gives a job its cards exclusively and exports them in CUDA_VISIBLE_DEVICES,
    renumbered from 0 where it confines devices. They are used as given: host-wide lock
    files keyed by those numbers would make two jobs on one node wait for each other."""
    job = os.environ.get("SLURM_JOB_ID")
    if job is None or os.environ.get("SKILLEVAL_GPU_DEVICES"):
        return None
    kept = os.environ.get(SCHEDULER_CARDS_VARIABLE, "")
    if kept.startswith(f"{job}="):
        return parse_devices(kept.partition("=")[2])
    return parse_devices(os.environ.get("CUDA_VISIBLE_DEVICES", ""))


def host_inventory() -> dict[int, str] | None:
    """Card index -> UUID as nvidia-smi numbers the host's cards; None without nvidia-smi."""
    found = query_gpus("uuid")
    return None if found is None else {int(index): uuid for index, uuid in found.items()}


def check_inventory(allowed: Sequence[int], inventory: Mapping[int, str] | None) -> None:
    """The profile's cards must be cards nvidia-smi lists on this host."""
    if inventory is None:
        log.info("card inventory not checked: no nvidia-smi on this host")
        return
    missing = sorted(set(allowed) - set(inventory))
    if missing:
        raise GpuLeaseError(
            f"the profile's gpu_devices allow cards {missing}, which nvidia-smi does not list "
            f"on this host (it lists {sorted(inventory)}); set gpu_devices to cards this "
            "host has"
        )


@contextlib.contextmanager
def job_lease(count: int, occupied: Sequence[int] = ()) -> Iterator[GpuLease]:
    """This job's cards: the scheduler's, or leased from the host's allowed set."""
    assigned = scheduler_cards()
    if assigned is None:
        allowed, protected = allowed_devices()
        if count > 0:
            check_inventory(allowed, host_inventory())
        with gpu_lease(count, allowed, protected=protected, occupied=occupied) as lease:
            yield lease
        return
    if count > len(assigned):
        raise GpuLeaseError(
            f"job asks for {count} GPU(s) but SLURM job {os.environ['SLURM_JOB_ID']} was "
            f"given {len(assigned)} (CUDA_VISIBLE_DEVICES={assigned}); submit it with the "
            "rule's gpu resource as --gpus"
        )
    lease = GpuLease(tuple(assigned[:count]), time.time(), 0.0)
    log.info(
        "GPU lease: devices %s assigned by SLURM job %s (SLURM_JOB_GPUS=%s)",
        lease.visible_devices,
        os.environ["SLURM_JOB_ID"],
        os.environ.get("SLURM_JOB_GPUS") or os.environ.get("SLURM_STEP_GPUS", "unset"),
    )
    yield lease


def export_allowed(gpu_devices: object) -> None:
    """Make the profile's gpu_devices resource visible to the job's package code."""
    if gpu_devices not in (None, ""):
        os.environ["SKILLEVAL_GPU_DEVICES"] = str(gpu_devices)


def profile_cards(default_resources: list[str] | None) -> str | None:
    """The gpu_devices a profile's default-resources declare (e.g. '1-13'), if any."""
    for item in default_resources or []:
        name, _, value = item.partition("=")
        if name.strip() == "gpu_devices":
            return value.strip().strip("'\"")
    return None


def check_requests(
    requests: dict[str, int], host_total: int | None, source: object, cards: object = None
) -> None:
    """Parse-time check: nothing may ask for more cards than the profile gives this host.

    ``requests`` maps what asks (a config key, or a rule) to its cards; ``source`` names
    the file (or, with ``where``, the file and line) holding that key."""
    if host_total is None:
        return
    for asker, count in requests.items():
        if count > host_total:
            location = locate(source, asker)
            inventory = f", cards {cards}" if cards not in (None, "") else ""
            what = " (tp x dp_size)" if asker.endswith(".model_server") else ""
            raise GpuLeaseError(
                f"{location}: {asker} asks for gpu={count}{what} but the profile allows "
                f"gpu={host_total} (its --resources gpu{inventory}); lower the request or "
                "run with a profile for a host with more cards"
            )


def cards_for(model_server: str, tp: int | None, dp_size: int | None) -> int:
    """Cards a run's job leases: the protocol's tp x dp when the job launches the server
    itself."""
    if model_server not in ("process", "docker"):
        return 0
    return (tp or 1) * (dp_size or 1)


def gpu_requests(kind: str, served: Mapping[str, Served]) -> dict[str, int]:
    """Cards the runs of each protocol ask for (tp x dp_size) under the ``kind`` of model
    server (backends.model_server), by the config key that asks."""
    return {
        f"protocols.{name}.model_server": cards_for(kind, server.tp, server.dp_size)
        for name, server in served.items()
    }
