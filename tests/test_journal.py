from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

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


class LostLock:
    """A lock that does not hold, as a lock on a shared file system can be lost."""

    def __init__(self, *_: object) -> None:
        pass

    def acquire(self, timeout: float = 0) -> None:
        pass

    def release(self) -> None:
        pass


def _complete_run(world: Path, out: Path) -> tuple[Any, list[dict[str, Any]]]:
    from skilleval.provenance.evidence import model_run_code
    from skilleval.runs.evaluation import evaluate
    from skilleval.runs.resolve import resolve
    from tests.conftest import read_jsonl, run_inputs

    inputs = run_inputs(world)
    evaluate(inputs, str(out / "results.jsonl"), str(out / "summary.json"), str(out / "journal"))
    return resolve(inputs, model_run_code()), read_jsonl(out / "results.jsonl")


def test_two_writers_past_a_lost_lock_void_the_run_and_its_contrast(
    tmp_path: Path, small_world: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from skilleval.analysis.contrast import build_contrast
    from skilleval.analysis.verdict import verdict_of
    from skilleval.config.model import Statistics
    from skilleval.paths import RunFiles
    from skilleval.runs import journal as journal_module
    from skilleval.runs.evaluation import evaluate
    from tests.conftest import run_inputs

    resolved, records = _complete_run(small_world, tmp_path / "clean")
    root = tmp_path / "shared" / "journal"
    with monkeypatch.context() as patched:
        patched.setattr(journal_module, "FileLock", LostLock)
        first = Journal(root, "base-S0", resolved.fingerprint, dict(resolved.identity.parts))
        second = Journal(root, "base-S0", resolved.fingerprint, dict(resolved.identity.parts))
        with first, second:  # both got past the lock
            first.append(records[0])
            second.append(records[1])
            first.append(records[2])
    out = tmp_path / "shared"
    summary = evaluate(
        run_inputs(small_world), str(out / "results.jsonl"), str(out / "summary.json"), str(root)
    )
    assert summary["execution"]["single_writer"] is False
    writers = summary["provenance"]["writers"]  # hosts, pids and times: provenance
    assert "interleave" in writers["single_writer_detail"]
    assert len(writers["sessions"]) == 3 and all(
        {"host", "pid", "start", "end"} <= set(s) for s in writers["sessions"]
    )
    contrast = build_contrast(
        "s0-gain",
        {"causal": True},
        Statistics(n_resamples=200, confidence=0.95, seed=1, method="percentile"),
        RunFiles.in_directory(str(tmp_path / "clean")),
        RunFiles.in_directory(str(out)),
        str(tmp_path / "contrast.json"),
    )
    check = next(c for c in contrast["checks"] if c["name"] == "single_writer_treatment")
    assert check["passed"] is False and "interleave" in check["detail"]
    assert verdict_of(contrast)["verdict"] == "invalid"
    clean = next(c for c in contrast["checks"] if c["name"] == "single_writer_control")
    assert clean["passed"] is True


def test_a_killed_and_resumed_run_has_two_sessions_one_after_the_other(
    tmp_path: Path, small_world: Path
) -> None:
    from skilleval.runs.evaluation import evaluate
    from tests.conftest import run_inputs

    resolved, records = _complete_run(small_world, tmp_path / "clean")
    root = tmp_path / "resumed" / "journal"
    killed = Journal(
        root, "base-S0", resolved.fingerprint, dict(resolved.identity.parts)
    ).__enter__()
    for record in records[:5]:
        killed.append(record)
    # Killed: no end is recorded; the kernel frees the lock with the process.
    killed._lock.release()
    out = tmp_path / "resumed"
    summary = evaluate(
        run_inputs(small_world), str(out / "results.jsonl"), str(out / "summary.json"), str(root)
    )
    sessions = summary["provenance"]["writers"]["sessions"]
    assert len(sessions) == 2 and sessions[0]["end"] is None and sessions[1]["end"]
    assert summary["execution"]["single_writer"] is True
    assert summary["provenance"]["execution"]["reused_from_journal"] == 5


def test_the_writer_check_fails_on_lines_of_no_session_and_on_overlapping_spans() -> None:
    from skilleval.storage.writers import UNRECORDED, Session, check_writers

    a = Session("a", "h", 1, "2026-01-01T00:00:00", "2026-01-01T01:00:00")
    b = Session("b", "h", 2, "2026-01-01T00:30:00", "2026-01-01T02:00:00")
    c = Session("c", "h", 3, "2026-01-01T03:00:00", None)
    assert check_writers([a, c], ["a", "a", "c"]).single_writer
    assert not check_writers([a, b], ["a", "b"]).single_writer  # spans overlap
    assert not check_writers([a, c], ["a", "c", "a"]).single_writer  # interleaved
    assert not check_writers([a], ["a", UNRECORDED]).single_writer
    assert not check_writers([a], ["a", "z"]).single_writer  # a session with no start record


def test_a_trainer_job_sees_another_live_process_naming_its_out_root(tmp_path: Path) -> None:
    import subprocess
    import sys
    import time

    from skilleval.storage.writers import out_root_writers

    out_root = tmp_path / "LR-docvqa-2"
    out_root.mkdir()
    alone = out_root_writers(out_root)
    assert alone["single_writer"] is True, alone
    sleeper = [sys.executable, "-c", "import time; time.sleep(30)"]
    neighbour = subprocess.Popen([*sleeper, f"env.out_root={tmp_path / 'LR-docvqa-24'}"])
    other = subprocess.Popen([*sleeper, f"env.out_root={out_root.resolve()}"])
    try:
        # Looked for until the process shows (at most 5 s), so a slow start cannot fail it.
        for _ in range(50):
            seen = out_root_writers(out_root)
            if not seen["single_writer"]:
                break
            time.sleep(0.1)
    finally:
        for process in (neighbour, other):
            process.kill()
            process.wait()
    assert seen["single_writer"] is False, seen
    pids = {o["pid"] for o in seen["others"]}
    assert other.pid in pids and neighbour.pid not in pids, seen  # not the run-24 neighbour
    assert str(other.pid) in seen["single_writer_detail"]
