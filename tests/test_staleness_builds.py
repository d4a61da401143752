"""Edits on a built graph that are built, not only planned: what the dry run plans, what
the build then computes (a kept result is restored, not recomputed), and that a second
build elsewhere is identical. The staleness oracle is tests/stale_oracle.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import skilleval_cli, snakemake
from tests.stale_oracle import (
    CONFIG,
    EVERY_RUN,
    RANKED,
    build_and_count,
    edited,
    model_runs,
    stale,
    stale_and_costs,
    stems,
)  # fmt: skip

pytestmark = pytest.mark.slow


def test_after_a_forced_run_both_name_its_dependents(built: Path) -> None:
    summary = built / "results/runs/final-ST/summary.json"
    before = summary.read_bytes()
    snakemake(built, "-f", "results/runs/final-ST/summary.json", "-j", "1", *CONFIG)
    # Its result is kept, so the forced job restores it byte for byte; Snakemake compares
    # the checksum of an input newer than its outputs, so nothing below it is stale.
    assert summary.read_bytes() == before and stale(built, "paper") == {}
    for kept in (built / "results/journal/final-ST").glob("*.complete"):
        shutil.rmtree(kept)
    snakemake(built, "-f", "results/runs/final-ST/summary.json", "-j", "1", *CONFIG)
    jobs = stale(built, "paper")
    assert stems(jobs["contrast"]) == {"internalisation-gap", "upper-bound", "final-vs-initial"}
    snakemake(built, "paper", "-j", "2", *CONFIG)
    assert stale(built, "paper") == {}


def test_archiving_a_run_makes_the_next_build_redo_it_and_its_dependents(built: Path) -> None:
    done = skilleval_cli(built, "archive", "base-free", "--reason", "test", "--root", str(built))
    assert done.returncode == 0, done.stderr
    jobs = stale(built, "paper")
    assert "results/runs/base-free/summary.json" in jobs["eval_run"]
    assert {"s0-gain", "internalisation"} <= stems(jobs["contrast"])
    snakemake(built, "paper", "-j", "2", *CONFIG)
    assert stale(built, "paper") == {}


def comparable(path: Path) -> object:
    """A built file's content without its provenance blocks (JSON) or as bytes."""
    if path.suffix not in (".json", ".jsonl"):
        return path.read_bytes()

    def strip(value: object) -> object:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != "provenance"}
        return [strip(v) for v in value] if isinstance(value, list) else value

    lines = path.read_text().splitlines() if path.suffix == ".jsonl" else [path.read_text()]
    return [strip(json.loads(line)) for line in lines if line.strip()]


def compare_builds(first: Path, second: Path) -> tuple[int, list[str]]:
    """(files compared, those that differ) between two builds of one graph: every built
    file under results/ (not logs, journals, archives), paper/tables and paper/figures,
    apart from provenance."""
    compared, differing = 0, []
    for folder in ("results", "paper/tables", "paper/figures"):
        for path in sorted((first / folder).rglob("*")):
            relative = path.relative_to(first)
            skipped = relative.parts[:2] in {("results", p) for p in ("logs", "journal", "archive")}
            if path.is_dir() or skipped or relative.name.endswith(".log"):
                continue
            compared += 1
            twin = second / relative
            if not twin.exists() or comparable(path) != comparable(twin):
                differing.append(str(relative))
    return compared, differing


def test_a_second_build_in_another_directory_is_identical(
    built: Path, resumed_paper_build: tuple[Path, str]
) -> None:
    # The second build (conftest.resumed_paper_build) ran one directory deeper, and was
    # interrupted and resumed: neither may show in what it built.
    compared, differing = compare_builds(built, resumed_paper_build[0])
    assert compared > 1000 and differing == [], differing[:20]


def test_a_statistics_helper_reruns_the_bank_freeze_but_computes_no_episode(built: Path) -> None:
    module = built / "skilleval" / "analysis" / "bootstrap.py"
    ranked = {f"results/runs/{r}/summary.json" for r in RANKED}
    before = {r: (built / r).read_bytes() for r in ranked}
    with edited(module, lambda t: t + "\ndef unused_helper() -> int:\n    return 1\n"):
        jobs, costs = stale_and_costs(built, "paper")
        assert model_runs(jobs) == ranked
        assert set(costs.values()) == {"conditional"}  # the frozen banks may come out the same
        # The runs and what they need; the tables under the edit are another test's matter.
        computed = build_and_count(built, targets=sorted(ranked))
    assert {computed[f"runs/{r}.log"] for r in RANKED} == {0}
    assert {r: (built / r).read_bytes() for r in ranked} == before
    # The revert, likewise (as in the rollout test, the paper: the banks were refrozen).
    assert build_and_count(built).get("runs/rank-top-4.log") == 0
    assert stale(built, "paper") == {}


def test_a_rollout_edit_recomputes_every_episode_and_its_revert_restores_them(
    built: Path,
) -> None:
    module = built / "skilleval" / "env" / "rollout.py"
    old = "        while len(turns) < max_steps:"
    with edited(module, lambda t: t.replace(old, "        while len(turns) < max_steps - 5:")):
        jobs, costs = stale_and_costs(built, "paper")
        runs = sorted(model_runs(jobs))
        assert len(runs) == EVERY_RUN and set(costs.values()) == {"certain"}
        # The runs only: what is computed from them under the edit is no matter here.
        computed = build_and_count(built, targets=runs)
    episodes = {name: n for name, n in computed.items() if name.startswith(("runs/", "gate/"))}
    assert len(episodes) == EVERY_RUN and set(episodes.values()) == {48}  # 0 reused
    # Back to the old code: every run restores what it had, from its archived journal, byte
    # for byte; the paper then rebuilds only what the edit's build rebuilt on the way to the
    # ranked runs (the gate's betas and the frozen banks, whose provenance differs).
    computed = build_and_count(built)
    restored = {name: n for name, n in computed.items() if name.startswith(("runs/", "gate/"))}
    assert len(restored) == EVERY_RUN and set(restored.values()) == {0}
    assert stale(built, "paper") == {}


def test_identical_copies_under_new_paths_plan_nothing(built: Path) -> None:
    originals = {
        "bank": built / "results/world/banks/S0.md",
        "split": built / "results/world/persona_splits.v1.json",
        "checkpoint": built / "results/world/checkpoints/final/model.safetensors",
    }

    def overlay(folder: str) -> str:
        copies = {role: built / folder / path.name for role, path in originals.items()}
        for role, path in originals.items():
            copies[role].parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, copies[role])
        tasks = f"{{split_file: {folder}/{originals['split'].name}, split: test}}"
        text = (
            f"banks:\n  S0: {{path: {folder}/S0.md}}\n"
            f"checkpoints:\n  final: {{path: {folder}/model.safetensors}}\n"
            "protocols:\n"
            + "".join(f"  {p}:\n    tasks: {tasks}\n" for p in ("local-sglang", "hosted-api"))
        )
        (built / "config" / f"{folder}.yaml").write_text(text)
        return f"config/{folder}.yaml"

    # From built files to files the graph only reads: the runs restore what they had.
    first = overlay("copies-a")
    computed = build_and_count(built, "config/small.yaml", first)
    assert computed and set(computed.values()) == {0}
    # From one copy to another: nothing is planned at all.
    second = overlay("copies-b")
    assert stale(built, "paper", configfiles=("config/small.yaml", second)) == {}
    build_and_count(built)
    assert stale(built, "paper") == {}
