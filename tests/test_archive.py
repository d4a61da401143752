from __future__ import annotations

import json
from pathlib import Path

import pytest

from skilleval.config.model import Config
from skilleval.errors import SkillevalError
from skilleval.workflow.archive import archive_run, clean_run
from tests.conftest import load_default_config


def default_config() -> Config:
    return Config.model_validate(load_default_config())


def make_run(root: Path, run: str, finished: bool) -> None:
    (root / "results" / "runs" / run).mkdir(parents=True)
    (root / "results" / "journal" / run).mkdir(parents=True)
    (root / "results" / "journal" / run / "fp.jsonl").write_text('{"task_id": "a"}\n')
    if finished:
        (root / "results" / "runs" / run / "summary.json").write_text("{}")


def test_archive_moves_everything_with_a_reason(tmp_path: Path) -> None:
    make_run(tmp_path, "base-free", finished=True)
    target = archive_run("base-free", "protocol changed", default_config(), tmp_path)
    assert not (tmp_path / "results" / "runs" / "base-free").exists()
    why = json.loads((target / "why.json").read_text())
    assert why["reason"] == "protocol changed" and len(why["moved"]) == 2
    assert (target / "journal__base-free" / "fp.jsonl").exists()


def test_clean_lists_by_default_and_deletes_only_when_asked(tmp_path: Path) -> None:
    make_run(tmp_path, "round-004", finished=False)
    config = load_default_config()
    listed = clean_run("round-004", Config.model_validate(config), tmp_path, "list")
    assert len(listed) == 2 and all(p.exists() for p in listed)
    clean_run("round-004", Config.model_validate(config), tmp_path, "delete")
    assert not any(p.exists() for p in listed)


def test_clean_refuses_finished_runs_and_registered_inputs(tmp_path: Path) -> None:
    make_run(tmp_path, "base-S0", finished=True)
    with pytest.raises(SkillevalError, match="is finished"):
        clean_run("base-S0", default_config(), tmp_path, "delete")
    config = load_default_config()
    config["checkpoints"]["base"]["path"] = "results/runs/oops/model.safetensors"
    make_run(tmp_path, "oops", finished=False)
    with pytest.raises(SkillevalError, match="registered checkpoint or bank"):
        clean_run("oops", Config.model_validate(config), tmp_path, "delete")
    assert (tmp_path / "results" / "runs" / "oops").exists()


def test_archive_takes_a_masked_gate_run_and_refuses_an_undeclared_name(tmp_path: Path) -> None:
    config = default_config()
    run_dir = tmp_path / "results" / "gate" / "draft16" / "runs" / "masked-03"
    journal = tmp_path / "results" / "journal" / "gate-draft16-masked-03"
    log = tmp_path / "results" / "logs" / "gate" / "draft16-masked-03.log"
    for folder in (run_dir, journal, log.parent):
        folder.mkdir(parents=True)
    (run_dir / "summary.json").write_text("{}")
    log.write_text("done\n")
    target = archive_run("masked-03", "mask design changed", config, tmp_path)
    assert not run_dir.exists() and not journal.exists() and not log.exists()
    assert len(json.loads((target / "why.json").read_text())["moved"]) == 3
    with pytest.raises(SkillevalError, match=r"no run 'masked-3' \(did you mean masked-03"):
        archive_run("masked-3", "typo", config, tmp_path)
