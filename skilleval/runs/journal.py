"""Append-only run journals that survive kills, keyed by the run's evidence identity.

The fingerprint is the digest of the run's evidence identity (provenance.identity): its
inputs' contents and the code that can change an episode. The journal lives outside
Snakemake's declared outputs (which Snakemake deletes before a job runs and when it
fails), so finished tasks are never lost. A journal written under another fingerprint
is moved to the archive with a record of why, never reused under the new one and never
deleted; when the fingerprint comes back (a reverted edit), its archived journal is
moved back and reused.

A run that completes keeps a copy of its outputs beside its journal. A later job of the
same fingerprint restores them byte for byte instead of running anything: that is the
early cutoff that spares a card lease and a server start when an upstream output came
out identical. One writer per run is enforced with an OS file lock, which the kernel
releases even on SIGKILL, and measured besides (storage.writers): each writing session is
recorded in ``<fingerprint>.sessions`` and each journal line names the session that wrote
it, so a second writer that got past the lock shows in the run's summary.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from skilleval.errors import RunLockedError
from skilleval.storage.atomic import disk_error
from skilleval.storage.kept import KeptOutputs
from skilleval.storage.records import FORMAT_VERSIONS, versioned
from skilleval.storage.writers import UNRECORDED, Session, SessionLog, WriterCheck, check_writers

log = logging.getLogger(__name__)

RecordKey = tuple[str, int]


def record_key(record: dict[str, Any]) -> RecordKey:
    return (str(record["task_id"]), int(record.get("repeat", 0)))


def read_journal(path: Path) -> tuple[list[dict[str, Any]], int]:
    """Records of a journal and the byte length of its intact prefix.

    A kill can leave the last line half-written; it is not a record, and the intact
    prefix is where appending resumes. A malformed line in the middle is corruption.
    """
    records: list[dict[str, Any]] = []
    intact = 0
    if not path.exists():
        return records, intact
    data = path.read_bytes()
    lines = data.split(b"\n")
    for i, line in enumerate(lines):
        is_last = i == len(lines) - 1
        if not line.strip():
            intact += len(line) + (0 if is_last else 1)
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if is_last or all(not rest.strip() for rest in lines[i + 1 :]):
                break
            raise ValueError(f"{path}: line {i + 1} is corrupt and not the last line") from exc
        if is_last:
            break
        intact += len(line) + 1
    return records, intact


class Journal:
    def __init__(
        self,
        root: Path,
        run: str,
        fingerprint: str,
        identity: dict[str, Any],
        code: Mapping[str, str] | None = None,
    ) -> None:
        self.dir = Path(root) / run
        self.run = run
        self.fingerprint = fingerprint
        self.identity = identity
        self.code = dict(code or {})
        self.path = self.dir / f"{fingerprint}.jsonl"
        self.complete_dir = self.dir / f"{fingerprint}.complete"
        # The outputs of this fingerprint's complete run, for a later job to restore.
        self.complete = KeptOutputs(self.complete_dir)
        self._lock = FileLock(str(self.dir / ".writer.lock"))
        self._fd: int | None = None
        self.records: dict[RecordKey, dict[str, Any]] = {}
        self.sessions_path = self.dir / f"{fingerprint}.sessions"
        self.session_log = SessionLog(self.sessions_path)
        self.session: Session | None = None
        # The writing session of every journal line, in the order the lines were written.
        self.append_order: list[str] = []

    def __enter__(self) -> Journal:
        self.dir.mkdir(parents=True, exist_ok=True)
        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            holder = (
                (self.dir / ".writer.pid").read_text().strip()
                if (self.dir / ".writer.pid").exists()
                else "unknown"
            )
            raise RunLockedError(
                f"run {self.run!r} is already being written by another process (pid {holder}); "
                f"wait for it to finish or stop it. Lock: {self.dir / '.writer.lock'}"
            ) from None
        (self.dir / ".writer.pid").write_text(str(os.getpid()))
        self._archive_superseded()
        self._revive_archived()
        records, intact = read_journal(self.path)
        if self.path.exists() and intact < self.path.stat().st_size:
            with open(self.path, "r+b") as handle:
                handle.truncate(intact)
        for record in records:
            self.append_order.append(str(record.pop("session", UNRECORDED)))
            # Journals from before records were versioned hold version-1 records.
            record.setdefault("format_version", FORMAT_VERSIONS["task_record"])
            self.records[record_key(record)] = record
        meta = self.dir / f"{self.fingerprint}.meta.json"
        if not meta.exists():
            meta.write_text(
                json.dumps(
                    versioned(
                        "journal_meta",
                        {
                            "fingerprint": self.fingerprint,
                            **self.identity,
                            "evidence_code": self.code,
                        },
                    ),
                    indent=1,
                )
            )
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        self.session = self.session_log.begin()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self.session_log.end()
        self._lock.release()

    def writing_sessions(self) -> list[Session]:
        return self.session_log.sessions()

    def writer_check(self) -> WriterCheck:
        return check_writers(self.writing_sessions(), self.append_order)

    def append(self, record: dict[str, Any]) -> None:
        """Append one line, durably; a failed write is cut back, so no line is ever torn."""
        assert self._fd is not None and self.session, "append outside `with Journal(...)`"
        written_record = {**record, "session": self.session.id}
        line = (json.dumps(written_record, sort_keys=True) + "\n").encode()
        before = os.fstat(self._fd).st_size
        try:
            written = 0
            while written < len(line):
                written += os.write(self._fd, line[written:])
            os.fsync(self._fd)
        except OSError as error:
            os.ftruncate(self._fd, before)
            kept = f"; the {len(self.records)} tasks finished so far are kept in {self.path}"
            raise disk_error(self.path, error, kept) or error from None
        self.records[record_key(record)] = record
        self.append_order.append(self.session.id)

    def _revive_archived(self) -> None:
        """Move this fingerprint's most recently archived journal back, when none is here."""
        if self.path.exists():
            return
        archived = sorted(
            (archive_root(self.dir) / self.run).glob(f"{self.fingerprint}-*"),
            key=lambda folder: folder.name.rsplit("-", 1)[-1],
        )
        if not archived:
            return
        source = archived[-1]
        names = (self.path.name, f"{self.fingerprint}.meta.json", self.sessions_path.name)
        for name in (*names, self.complete_dir.name):
            if (source / name).exists():
                shutil.move(str(source / name), self.dir / name)
        log.info(
            "run %s: fingerprint %s was built before; its journal is moved back from %s",
            self.run,
            self.fingerprint,
            source,
        )

    def _archive_superseded(self) -> None:
        for old in sorted(self.dir.glob("*.jsonl")):
            if old.stem != self.fingerprint:
                archive_journal(
                    self.dir, self.run, old.stem, self.fingerprint, self.identity, self.code
                )


def archive_journal(
    directory: Path,
    run: str,
    old_fp: str,
    fingerprint: str,
    identity: Mapping[str, Any],
    code: Mapping[str, str],
) -> None:
    """Move the journal of ``old_fp`` (and its meta, sessions and kept outputs) to the
    archive, with a why.json naming the inputs and code files that changed."""
    old = directory / f"{old_fp}.jsonl"
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
    target = archive_root(directory) / run / f"{old_fp}-{stamp}"
    target.mkdir(parents=True)
    old_meta_path = directory / f"{old_fp}.meta.json"
    old_meta = json.loads(old_meta_path.read_text()) if old_meta_path.exists() else {}
    changed = sorted(
        k
        for k in set(old_meta) | set(identity)
        if k not in ("fingerprint", "format_version", "evidence_code")
        and old_meta.get(k) != identity.get(k)
    )
    old_code = old_meta.get("evidence_code") or {}
    changed_code = sorted(f for f in set(old_code) | set(code) if old_code.get(f) != code.get(f))
    shutil.move(str(old), target / old.name)
    sessions = directory / f"{old_fp}.sessions"
    for kept in (old_meta_path, sessions, directory / f"{old_fp}.complete"):
        if kept.exists():
            shutil.move(str(kept), target / kept.name)
    (target / "why.json").write_text(
        json.dumps(
            versioned(
                "archive_note",
                {
                    "reason": "fingerprint changed: the run's inputs or the code "
                    "that computes its episodes differ, so its finished tasks "
                    "cannot be reused",
                    "old_fingerprint": old_fp,
                    "new_fingerprint": fingerprint,
                    "changed_inputs": changed,
                    "changed_code": changed_code,
                    "archived_at": stamp,
                },
            ),
            indent=1,
        )
    )


def archive_root(journal_run_dir: Path) -> Path:
    """The archive/journal folder beside the journal root."""
    return journal_run_dir.parent.parent / "archive" / "journal"


def prior_episode_steps(root: Path, run: str, task_ids: Iterable[str]) -> dict[str, float]:
    """Task id -> mean steps of its episodes in the other runs' journals under ``root`` (any
    checkpoint): what a run may expect of its tasks' lengths. Read for the order in which a
    run starts its episodes, never for a result."""
    wanted = set(task_ids)
    steps: dict[str, list[int]] = {}
    for path in sorted(Path(root).glob("*/*.jsonl")):
        if path.parent.name == run:
            continue
        records, _ = read_journal(path)
        for record in records:
            task, length = record.get("task_id"), record.get("steps")
            if task in wanted and isinstance(length, int):
                steps.setdefault(task, []).append(length)
    return {task: sum(v) / len(v) for task, v in steps.items()}
