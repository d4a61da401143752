"""Who wrote a result: writing sessions and what they prove about a single writer.

A file lock keeps a second writer out on one machine, but on a shared file system a lock
can be lost without anyone noticing, and memo 000's void contrast came from two processes
writing one run. So "one writer" is measured, not assumed: every writing session of a
journal is recorded (host, pid, start, end), every line it appends names it, and the check
fails when two sessions' appends interleave or their spans overlap. A session killed
before it could record its end has no end; its appends still show where it wrote.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import socket
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# The session of a journal line written before sessions were recorded.
UNRECORDED = "unrecorded"


@dataclass(frozen=True)
class Session:
    id: str
    host: str
    pid: int
    start: str
    end: str | None = None

    @classmethod
    def begin(cls) -> Session:
        now = dt.datetime.now(dt.UTC)
        host, pid = socket.gethostname(), os.getpid()
        return cls(f"{host}-{pid}-{now.strftime('%Y%m%dT%H%M%S%fZ')}", host, pid, now.isoformat())

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


class SessionLog:
    """A journal's writing sessions, one JSON line per start and per end, appended and
    fsynced: a killed session leaves its start and no end."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.current: Session | None = None

    def begin(self) -> Session:
        self.current = Session.begin()
        self._append({"event": "start", **self.current.as_json()})
        return self.current

    def end(self) -> None:
        if self.current is not None:
            end = dt.datetime.now(dt.UTC).isoformat()
            self._append({"event": "end", "id": self.current.id, "end": end})

    def _append(self, event: dict[str, Any]) -> None:
        with open(self.path, "a") as handle:
            handle.write(json.dumps(event, sort_keys=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def sessions(self) -> list[Session]:
        """Every session that opened the journal, with its end where it recorded one;
        the current one ends now."""
        starts: dict[str, dict[str, Any]] = {}
        ends: dict[str, str] = {}
        lines = self.path.read_text().splitlines() if self.path.exists() else []
        for event in (json.loads(line) for line in lines if line.strip()):
            if event["event"] == "start":
                starts[event["id"]] = event
            else:
                ends[event["id"]] = event["end"]
        now = dt.datetime.now(dt.UTC).isoformat()
        current = self.current.id if self.current else None
        return [
            Session(
                sid,
                event["host"],
                int(event["pid"]),
                event["start"],
                ends.get(sid, now if sid == current else None),
            )
            for sid, event in starts.items()
        ]


@dataclass(frozen=True)
class WriterCheck:
    single_writer: bool
    detail: str

    def as_json(self) -> dict[str, Any]:
        return {"single_writer": self.single_writer, "single_writer_detail": self.detail}


def check_writers(sessions: Sequence[Session], append_order: Sequence[str]) -> WriterCheck:
    """One writer at a time: no session appended between two appends of another, and no
    two sessions' recorded spans (start to end) overlap. Lines of no recorded session fail
    the check: nothing shows who wrote them."""
    if UNRECORDED in append_order:
        count = sum(s == UNRECORDED for s in append_order)
        return WriterCheck(False, f"{count} line(s) name no writing session")
    known = {s.id for s in sessions}
    strangers = sorted(set(append_order) - known)
    if strangers:
        return WriterCheck(False, f"lines of sessions with no start record: {strangers}")
    runs: list[str] = []
    for session in append_order:
        if not runs or runs[-1] != session:
            runs.append(session)
    interleaved = sorted({s for s in runs if runs.count(s) > 1})
    if interleaved:
        return WriterCheck(
            False, f"appends of sessions {interleaved} interleave with another session's"
        )
    timed = sorted((s for s in sessions if s.end is not None), key=lambda s: s.start)
    for earlier, later in itertools.pairwise(timed):
        assert earlier.end is not None
        if later.start < earlier.end:
            return WriterCheck(
                False,
                f"session {later.id} started at {later.start}, before session {earlier.id} "
                f"ended at {earlier.end}",
            )
    hosts = sorted({s.host for s in sessions})
    return WriterCheck(
        True,
        f"{len(sessions)} writing session(s) on {', '.join(hosts) or 'no host'}, one after "
        "another, none interleaved",
    )


def _ancestors(proc: Path) -> set[int]:
    """This process and the ones that started it (the job's shell names its outputs)."""
    pids, pid = {os.getpid()}, os.getppid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            status = (proc / str(pid) / "status").read_text()
        except OSError:
            break
        pid = next(
            (int(line.split()[1]) for line in status.splitlines() if line.startswith("PPid:")), 0
        )
    return pids


def _names_path(word: str, target: str) -> bool:
    """``word`` is the path, a key=path argument, or a path inside it (not .../run-24 for
    .../run-2)."""
    value = word.split("=", 1)[1] if "=" in word else word
    return value == target or value.startswith(target + "/")


def processes_naming(path: Path, proc: Path = Path("/proc")) -> list[dict[str, Any]] | None:
    """Other live processes on this host whose command line names ``path`` (memo 003 §4's
    check by hand: another trainer writing the same out_root), this job's own ancestry
    aside; None where the host has no /proc to look in."""
    if not proc.is_dir():
        return None
    target = str(path.resolve())
    own = _ancestors(proc)
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) in own:
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [a.decode(errors="replace") for a in argv if a]
        if any(_names_path(word, target) for word in words):
            found.append({"pid": int(entry.name), "argv": words})
    return found


def out_root_writers(out_root: Path) -> dict[str, Any]:
    """What a trainer job saw of other writers of its out_root before it started."""
    others = processes_naming(out_root)
    if others is None:
        detail = "cannot look for other writers: this host has no /proc"
    elif others:
        detail = f"{len(others)} other live process(es) name {out_root.resolve()}: " + ", ".join(
            str(o["pid"]) for o in others
        )
    else:
        detail = f"no other live process on {socket.gethostname()} names {out_root.resolve()}"
    return {
        "single_writer": others == [],
        "single_writer_detail": detail,
        "looked_in": "/proc/*/cmdline",
        "host": socket.gethostname(),
        "others": others or [],
    }
