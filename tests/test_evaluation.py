from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest

from skilleval.env.rollout import turn_end
from skilleval.errors import CoverageError, SkillevalError
from skilleval.records.policy import AssistantTurn
from skilleval.runs.evaluation import evaluate
from skilleval.runs.runner import RetryPolicy
from tests.conftest import protocol_values, read_jsonl, run_inputs

DETERMINISTIC = (
    "task_id",
    "repeat",
    "reward",
    "r_strict",
    "r_success",
    "steps",
    "tokens",
    "stop_reason",
)


def strip(records: list[dict[str, object]]) -> list[dict[str, object]]:
    return [{k: r[k] for k in DETERMINISTIC} for r in records]


def test_run_reaches_coverage_one_and_records_everything(small_world: Path, tmp_path: Path) -> None:
    summary = evaluate(
        run_inputs(small_world),
        str(tmp_path / "r.jsonl"),
        str(tmp_path / "s.json"),
        str(tmp_path / "journal"),
    )
    records = read_jsonl(tmp_path / "r.jsonl")
    assert summary["coverage"] == 1.0 and summary["n_tasks"] == 48 == len(records)
    for key in ("reward", "r_strict", "r_success", "r_category", "r_budget", "r_attrs"):
        assert 0.0 <= summary[key] <= 1.0
    assert summary["provenance"]["packages"]["skilleval"]
    assert summary["service"]["unchanged"] is True
    assert {"commit", "dirty"} <= set(summary["provenance"]["git"])


def test_sigkill_then_resume_runs_only_missing_tasks(small_world: Path, tmp_path: Path) -> None:
    inputs = run_inputs(small_world)
    reference = evaluate(
        inputs,
        str(tmp_path / "ref.jsonl"),
        str(tmp_path / "ref.json"),
        str(tmp_path / "journal-ref"),
    )
    script = textwrap.dedent(f"""
        import pickle, time
        import skilleval.runs.evaluation as evaluation
        from skilleval.runs.evaluation import evaluate
        slow = evaluation.run_episode
        def run_episode(policy, environment, task_id, *args, **kwargs):
            # The first 12 tasks finish; the rest hang until the kill, so it lands mid-run
            # however slow the machine is.
            time.sleep(0.01 if task_id < "test-0012" else 60)
            return slow(policy, environment, task_id, *args, **kwargs)
        evaluation.run_episode = run_episode
        inputs = pickle.loads(bytes.fromhex({pickle.dumps(inputs).hex()!r}))
        evaluate(inputs, "out.jsonl", "out.json", "journal")
    """)
    (tmp_path / "slow.py").write_text(script)
    proc = subprocess.Popen([sys.executable, "slow.py"], cwd=tmp_path, stderr=subprocess.DEVNULL)
    journal = tmp_path / "journal" / "base-S0" / f"{reference['fingerprint']}.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if journal.exists() and journal.read_text().count("\n") >= 12:
            break
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = len(read_jsonl(journal))
    assert finished == 12, "the kill must land in the middle of the run"
    assert not (tmp_path / "out.json").exists(), "declared outputs appear only at coverage 1"
    summary = evaluate(
        inputs, str(tmp_path / "out.jsonl"), str(tmp_path / "out.json"), str(tmp_path / "journal")
    )
    assert summary["provenance"]["execution"]["reused_from_journal"] == finished
    assert summary["provenance"]["execution"]["ran"] == 48 - finished
    assert strip(read_jsonl(tmp_path / "out.jsonl")) == strip(read_jsonl(tmp_path / "ref.jsonl"))


def test_injected_infrastructure_faults_are_retried_not_scored(
    small_world: Path, tmp_path: Path
) -> None:
    inputs = run_inputs(small_world)
    clean = evaluate(
        inputs, str(tmp_path / "a.jsonl"), str(tmp_path / "a.json"), str(tmp_path / "j1")
    )
    faulty = evaluate(
        inputs,
        str(tmp_path / "b.jsonl"),
        str(tmp_path / "b.json"),
        str(tmp_path / "j2"),
        fault_rate=0.2,
        retry=RetryPolicy(max_attempts=30, base_delay_s=0.001),
    )
    assert faulty["provenance"]["execution"]["infra_retries"] > 0
    records = read_jsonl(tmp_path / "b.jsonl")
    assert len({r["task_id"] for r in records}) == len(records) == 48
    assert strip(records) == strip(read_jsonl(tmp_path / "a.jsonl"))
    assert faulty["reward"] == clean["reward"]


def test_persistent_failure_fails_loudly_and_keeps_finished_tasks(
    small_world: Path, tmp_path: Path
) -> None:
    with pytest.raises(CoverageError, match=r"failed on infrastructure.*re-run to resume"):
        evaluate(
            run_inputs(small_world),
            str(tmp_path / "r.jsonl"),
            str(tmp_path / "s.json"),
            str(tmp_path / "journal"),
            fault_rate=0.9,
            retry=RetryPolicy(max_attempts=2, base_delay_s=0.001),
        )
    assert not (tmp_path / "s.json").exists()
    kept = list((tmp_path / "journal" / "base-S0").glob("*.jsonl"))
    assert kept and len(read_jsonl(kept[0])) > 0


def test_changed_protocol_starts_new_journal_and_archives_old(
    small_world: Path, tmp_path: Path
) -> None:
    inputs = run_inputs(small_world)
    first = evaluate(
        inputs, str(tmp_path / "r.jsonl"), str(tmp_path / "s.json"), str(tmp_path / "journal")
    )
    protocol = protocol_values(inputs)
    protocol["sampling"]["temperature"] = 0.7
    changed = run_inputs(small_world, protocol=protocol)
    second = evaluate(
        changed, str(tmp_path / "r.jsonl"), str(tmp_path / "s.json"), str(tmp_path / "journal")
    )
    assert second["fingerprint"] != first["fingerprint"]
    assert second["provenance"]["execution"]["reused_from_journal"] == 0
    why = next((tmp_path / "archive" / "journal" / "base-S0").glob("*/why.json"))
    assert json.loads(why.read_text())["changed_inputs"] == ["protocol_fingerprint"]


def test_bank_with_wrong_chunk_count_is_refused(small_world: Path, tmp_path: Path) -> None:
    with pytest.raises(SkillevalError, match="holds 10 chunks but the registry declares 8"):
        evaluate(
            run_inputs(small_world, bank_chunks=8),
            str(tmp_path / "r"),
            str(tmp_path / "s"),
            str(tmp_path / "j"),
        )


def test_registered_fingerprint_mismatch_is_refused(small_world: Path, tmp_path: Path) -> None:
    with pytest.raises(SkillevalError, match="the weights changed"):
        evaluate(
            run_inputs(small_world, checkpoint_expected_fingerprint="deadbeef"),
            str(tmp_path / "r"),
            str(tmp_path / "s"),
            str(tmp_path / "j"),
        )


def test_a_run_starts_its_longest_expected_episodes_first_with_the_same_results(
    small_world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With an earlier run's lengths of the same tasks in the journal root (another
    checkpoint, even), the run submits its longest expected episodes first; every task's
    record is what the listed order gives."""
    import skilleval.runs.evaluation as evaluation

    journal = str(tmp_path / "journal")
    evaluate(run_inputs(small_world, "final-free"), str(tmp_path / "f.jsonl"),
             str(tmp_path / "f.json"), journal)  # fmt: skip
    listed = evaluate(run_inputs(small_world, "base-S0"), str(tmp_path / "a.jsonl"),
                      str(tmp_path / "a.json"), str(tmp_path / "alone"))  # fmt: skip
    submitted: list[list[tuple[str, int]]] = []
    real = evaluation.run_episodes

    def recording(keys, *args, **kwargs):  # type: ignore[no-untyped-def]
        submitted.append(list(keys))
        return real(submitted[-1], *args, **kwargs)

    monkeypatch.setattr(evaluation, "run_episodes", recording)
    ordered = evaluate(run_inputs(small_world, "base-S0"), str(tmp_path / "b.jsonl"),
                       str(tmp_path / "b.json"), journal)  # fmt: skip
    steps = {r["task_id"]: r["steps"] for r in read_jsonl(tmp_path / "f.jsonl")}
    order = [steps[task] for task, _ in submitted[0]]
    assert order == sorted(order, reverse=True) and order != [steps[t] for t in sorted(steps)]
    assert read_jsonl(tmp_path / "b.jsonl") == read_jsonl(tmp_path / "a.jsonl")
    assert ordered["reward"] == listed["reward"]


def test_a_turn_cut_at_max_tokens_says_what_it_had_written() -> None:
    """A long answer cut short is no empty response: the episode's error says which."""
    cut = AssistantTurn("x" * 4021, None, (), 70, 4096, "length")
    assert turn_end(cut, {"search"}) == (
        "max_tokens",
        "truncated: completion hit max_tokens after 4021 characters of text, with no tool call",
    )
    thinking = replace(cut, content="", reasoning="y" * 12)
    assert turn_end(thinking, set())[1] == (
        "truncated: completion hit max_tokens after 12 characters of reasoning, with no tool call"
    )
    empty = replace(cut, content="")
    assert turn_end(empty, set()) == ("max_tokens", "empty response: completion hit max_tokens")
