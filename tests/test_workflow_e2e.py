"""The whole graph on a small world: build, no-op, staleness after changes, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import dry_run_outputs, snakemake

RUNS = ("base-free", "base-S0", "final-free", "final-ST")
CONTRASTS = ("s0-gain", "internalisation", "internalisation-gap", "upper-bound", "final-vs-initial")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import shutil

    from tests.conftest import REPO, WORKFLOW_PARTS

    workdir = tmp_path_factory.mktemp("graph")
    for part in WORKFLOW_PARTS:
        source = REPO / part
        if source.is_dir():
            shutil.copytree(
                source, workdir / part, ignore=shutil.ignore_patterns("tables", "figures", "*.pdf")
            )
        else:
            shutil.copy(source, workdir / part)
    shutil.copy(REPO / "tests" / "data" / "small.yaml", workdir / "config" / "small.yaml")
    snakemake(workdir, "paper", "-j", "2", "--configfile", "config/small.yaml")
    return workdir


def small(workdir: Path, *targets: str, extra_config: str | None = None) -> dict[str, set[str]]:
    configs = ["config/small.yaml", *([extra_config] if extra_config else [])]
    return dry_run_outputs(workdir, *targets, "--configfile", *configs)


def test_paper_builds_all_runs_contrasts_and_table(built: Path) -> None:
    for run in RUNS:
        summary = json.loads((built / "results" / "runs" / run / "summary.json").read_text())
        assert summary["coverage"] == 1.0 and summary["n_tasks"] == 48
    for name in CONTRASTS:
        verdict = json.loads((built / "results" / "verdicts" / f"{name}.json").read_text())
        assert verdict["verdict"] in {"improves", "regresses", "inconclusive", "descriptive"}
    final_vs_initial = json.loads((built / "results/verdicts/final-vs-initial.json").read_text())
    assert final_vs_initial["verdict"] == "descriptive"
    table = (built / "paper" / "tables" / "main.tex").read_text()
    assert r"\toprule" in table and "[" in table
    for name in (*RUNS, *CONTRASTS):
        assert name in table
    assert (built / "paper" / "figures" / "contrasts.png").stat().st_size > 1000
    assert (built / "paper" / "tables" / "main.csv").exists()


def test_nothing_is_stale_after_a_build(built: Path) -> None:
    assert small(built, "paper") == {}


def test_changing_st_bank_makes_only_st_dependents_stale(built: Path) -> None:
    bank = built / "results" / "world" / "banks" / "ST.md"
    original = bank.read_text()
    bank.write_text(original.replace("## chunk st-01\n", "## chunk st-01\n\nEdited by hand.\n"))
    try:
        jobs = small(built, "paper")
    finally:
        bank.write_text(original)
        snakemake(built, "paper", "--touch", "--configfile", "config/small.yaml")
    assert jobs["eval_run"] == {
        "results/runs/final-ST/results.jsonl",
        "results/runs/final-ST/summary.json",
    }
    stale_contrasts = {Path(o).stem for o in jobs["contrast"]}
    assert stale_contrasts == {"internalisation-gap", "upper-bound", "final-vs-initial"}
    assert "world_tasks" not in jobs and "world_checkpoint" not in jobs


def test_changing_a_protocol_value_makes_every_run_stale(built: Path) -> None:
    override = built / "config" / "hotter.yaml"
    override.write_text("protocols:\n  local-sglang:\n    sampling:\n      temperature: 0.7\n")
    jobs = small(built, "paper", extra_config="config/hotter.yaml")
    runs = {Path(o).parent.name for o in jobs["eval_run"]}
    assert runs == set(RUNS)
    assert "world_tasks" not in jobs
