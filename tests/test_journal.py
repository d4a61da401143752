from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from skilleval.errors import RunLockedError
from skilleval.runs.journal import Journal, read_journal


def test_truncated_last_line_is_dropped_and_overwritten(tmp_path: Path) -> None:
    with Journal(tmp_path, "run", "fp1", {"x": 1}) as journal:
        journal.append({"task_id": "a", "repeat": 0, "reward": 1.0})
        journal.append({"task_id": "b", "repeat": 0, "reward": 0.0})
    path = tmp_path / "run" / "fp1.jsonl"
    with open(path, "a") as handle:
        handle.write('{"task_id": "c", "rew')  # a kill in the middle of a write
    records, _ = read_journal(path)
    assert [r["task_id"] for r in records] == ["a", "b"]
    with Journal(tmp_path, "run", "fp1", {"x": 1}) as journal:
        assert set(journal.records) == {("a", 0), ("b", 0)}
        journal.append({"task_id": "c", "repeat": 0, "reward": 0.5})
    records, intact = read_journal(path)
    assert [r["task_id"] for r in records] == ["a", "b", "c"]
    assert intact == path.stat().st_size


def test_corrupt_line_in_the_middle_raises(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_text('{"task_id": "a"}\nnot json\n{"task_id": "b"}\n')
    with pytest.raises(ValueError, match="line 2 is corrupt"):
        read_journal(path)


def test_second_writer_is_refused(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import sys, time
            from pathlib import Path
            from skilleval.runs.journal import Journal
            with Journal(Path({str(tmp_path)!r}), "run", "fp", {{}}):
                print("locked", flush=True)
                time.sleep(60)
        """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with (
            pytest.raises(
                RunLockedError,
                match=rf"already being written by another process \(pid {holder.pid}\)",
            ),
            Journal(tmp_path, "run", "fp", {}),
        ):
            pass
    finally:
        holder.kill()
        holder.wait()
    # The kernel released the lock of the killed holder: a new writer gets in.
    with Journal(tmp_path, "run", "fp", {}):
        pass


def test_changed_fingerprint_archives_old_journal_with_reason(tmp_path: Path) -> None:
    with Journal(
        tmp_path / "journal", "run", "old", {"protocol_fingerprint": "p1", "bank": "S0"}
    ) as j:
        j.append({"task_id": "a", "repeat": 0, "reward": 1.0})
    with Journal(
        tmp_path / "journal", "run", "new", {"protocol_fingerprint": "p2", "bank": "S0"}
    ) as j:
        assert j.records == {}
    assert not (tmp_path / "journal" / "run" / "old.jsonl").exists()
    archived = list((tmp_path / "archive" / "journal" / "run").glob("old-*"))
    assert len(archived) == 1
    why = json.loads((archived[0] / "why.json").read_text())
    assert why["changed_inputs"] == ["protocol_fingerprint"]
    assert why["new_fingerprint"] == "new"
    assert (archived[0] / "old.jsonl").read_text().count("\n") == 1


def test_results_get_the_mode_the_umask_allows(tmp_path: Path) -> None:
    import os

    from skilleval.storage import atomic

    old = os.umask(0o027)
    try:
        atomic.write_text(tmp_path / "a.json", "{}")
        assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o640
        os.umask(0o022)
        atomic.write_text(tmp_path / "b.json", "{}")
        assert (tmp_path / "b.json").stat().st_mode & 0o777 == 0o644
    finally:
        os.umask(old)


def test_the_progress_line_never_prints_nan() -> None:
    from skilleval.runs.runner import RunStats

    resumed = RunStats(total=10, reused=4)
    assert "eta unknown" in resumed.line("r") and "nan" not in resumed.line("r")
    finished = RunStats(total=10, reused=10)
    assert ", done," in finished.line("r")
