"""The trainer seam: what a lab's trainer leaves in its out_root is read by one parser per
value, for the audit and for ``skilleval trainer check`` alike, and an earlier launch's
files are never read as the new one's (issue: the seams hold)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from skilleval.ablation.audit import audit_run
from skilleval.ablation.contract import TrainerContract
from skilleval.ablation.matrix import load_matrix
from skilleval.ablation.plan import plan
from skilleval.ablation.trainer import build_run
from skilleval.ablation.trainer_check import trainer_check
from skilleval.ablation.trainer_files import TrainerOutputError, read_mapping
from skilleval.config.matrix import Matrix
from skilleval.errors import ConfigError, SkillevalError
from tests.conftest import with_trainer
from tests.test_ablation import command_trainer, runs_by_id

RUN = "LR-docvqa-8"


def built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **contract: object) -> tuple:
    matrix = command_trainer(tmp_path, "docvqa", monkeypatch)
    if contract:
        matrix = with_trainer(matrix, contract=contract)
    run = runs_by_id(matrix)[RUN]
    build_run(run, matrix, run.summary_path)
    return matrix, run, Path(run.out_root).resolve()


def computable(out_root: Path, matrix: Matrix) -> dict[str, tuple[bool, str]]:
    found = trainer_check(out_root, TrainerContract.of(matrix))
    return {c.check: (c.computable, c.detail) for c in found}


def failed_reasons(run: object, matrix: Matrix) -> dict[str, str]:
    audit = audit_run(run, matrix, run.summary_path)  # type: ignore[attr-defined]
    return dict(reason.split(": ", 1) for reason in audit["reasons"])


def test_an_earlier_launch_s_files_move_aside_and_are_never_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    matrix = command_trainer(tmp_path, "docvqa", monkeypatch)
    run = runs_by_id(matrix)[RUN]
    out_root = Path(run.out_root)
    out_root.mkdir(parents=True)
    # What another trainer left: a log whose head says another start, a file of its own.
    (out_root / "train.log").write_text("[start] 2026-01-01T00:00:00+00:00\ntrain=1\n")
    (out_root / "steps").mkdir()
    (out_root / "steps" / "step_0001.json").write_text("{}")
    build_run(run, matrix, run.summary_path)
    assert not (out_root / "steps").exists()
    earlier = list((out_root.parent / ".earlier" / out_root.name).iterdir())
    assert len(earlier) == 1, earlier
    assert (earlier[0] / "train.log").read_text().startswith("[start] 2026-01-01")
    assert (earlier[0] / "steps" / "step_0001.json").exists()
    assert "2026-01-01" not in (out_root / "train.log").read_text()
    assert failed_reasons(run, matrix) == {}


def test_an_unparseable_log_value_is_cannot_and_an_invalid_run_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = {"batch_sizes": r"steps of one epoch: \[(.*)\]", "start": r"launched at (.*)"}
    matrix, run, out_root = built(tmp_path, monkeypatch, log_lines=lines)
    log = out_root / "train.log"
    head = [line for line in log.read_text().splitlines() if "started_at" not in line]
    log.write_text(
        "launched at yesterday\n" + "\n".join(head) + "\nsteps of one epoch: [40, 40, ..., 30]\n"
    )
    found = computable(out_root, matrix)
    assert found["batch_logic"][0] is False
    assert (
        "batch sizes '40, 40, ..., 30' are not a list of whole numbers" in found["batch_logic"][1]
    )
    assert found["started_after_fixes"] == (
        False,
        f"{log} line 1: start 'yesterday' is not an ISO 8601 time (such as "
        "2026-05-04T09:30:00+00:00); fix the trainer's log line or "
        "trainer.contract.log_lines.start",
    )
    reasons = failed_reasons(run, matrix)
    assert "not a list of whole numbers" in reasons["batch_logic"]
    assert reasons["started_after_fixes"].startswith("unknown start: ")


def test_a_config_without_a_key_the_audit_reads_is_a_reason_not_a_key_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    matrix, run, out_root = built(tmp_path, monkeypatch)
    config = out_root / "config.json"
    data = json.loads(config.read_text())
    del data["env"]["split_dir"], data["train"]["batch_size"]
    config.write_text(json.dumps(data))
    found = computable(out_root, matrix)
    assert found["batch_logic"] == (
        False,
        f"{config} has no train.batch_size (map it in trainer.contract.config_keys)",
    )
    reasons = failed_reasons(run, matrix)
    assert reasons["batch_logic"] == found["batch_logic"][1].replace(f"{tmp_path}/", "")


def test_a_truncated_file_names_itself_and_its_position(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    matrix, run, out_root = built(tmp_path, monkeypatch)
    config = out_root / "config.json"
    config.write_text(config.read_text()[:40])
    found = computable(out_root, matrix)
    said = found["only_declared_keys_differ"][1]
    assert not found["only_declared_keys_differ"][0]
    assert said.startswith(f"{config}: not valid JSON at line 1, column ") and "truncated" in said
    audit = audit_run(run, matrix, run.summary_path)
    relative = said.replace(f"{tmp_path}/", "")  # the audit names the run's relative out_root
    assert audit["valid"] is False and audit["reasons"] == [f"trainer_output_readable: {relative}"]
    # The trainer's scores truncated: the job stops naming the file, never a bare error.
    kept = out_root / "trainer_summary.json"
    kept.write_text('{"best_selection_score": 0.9, "base_')
    with pytest.raises(TrainerOutputError, match=rf"^{kept}: not valid JSON at line 1"):
        read_mapping(kept)
    results = computable(out_root, matrix)["scores"]
    assert results[0] is False and str(kept) in results[1]


def test_a_yaml_config_in_the_lab_s_own_key_names_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    matrix, run, out_root = built(tmp_path, monkeypatch)
    data = json.loads((out_root / "config.json").read_text())
    data["optim"] = {"bs": data["train"].pop("batch_size")}
    (out_root / "effective.yaml").write_text(yaml.safe_dump(data))
    lab = with_trainer(
        matrix,
        contract={"config_file": "effective.yaml", "config_keys": {"train.batch_size": "optim.bs"}},
    )
    assert all(ok for ok, _ in computable(out_root, lab).values())
    assert failed_reasons(run, lab) == {}
    (out_root / "effective.yaml").write_text("train: {batch_size: 40\n")
    with pytest.raises(SkillevalError, match=r"effective.yaml: not valid YAML at line 2"):
        read_mapping(out_root / "effective.yaml")


def test_a_lab_matrix_writes_only_what_differs(tmp_path: Path) -> None:
    shipped = Path("config/ablation/matrix.yaml").resolve()
    lab = tmp_path / "lab-matrix.yaml"
    lab.write_text(
        f"extends: {shipped}\n"
        "trainer: {kind: command, root: /srv/trainer, python: python3}\n"
        "benchmarks: {docvqa: {max_tokens: 8192}}\n"
    )
    matrix = load_matrix(lab)
    base = load_matrix(shipped)
    assert (matrix.trainer.kind, matrix.trainer.root) == ("command", "/srv/trainer")
    assert matrix.benchmarks["docvqa"].max_tokens == 8192
    assert matrix.benchmarks["docvqa"].config == base.benchmarks["docvqa"].config
    assert len(plan(matrix)) == len(plan(base))
    (tmp_path / "loop.yaml").write_text("extends: lab-matrix.yaml\n")
    lab.write_text("extends: loop.yaml\n")
    with pytest.raises(ConfigError, match="extends a matrix that extends this one"):
        load_matrix(lab)
