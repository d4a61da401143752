from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from skilleval.ablation.audit import audit_run
from skilleval.ablation.contract import TrainerContract
from skilleval.ablation.matrix import load_matrix
from skilleval.ablation.plan import PlannedRun, benchmark_defaults, effective_config, plan
from skilleval.ablation.ratios import ratio_sizes
from skilleval.ablation.trainer import (
    batch_sizes,
    build_run,
    launch_files,
    train_size_of,
    trainer_command,
)
from skilleval.ablation.trainer_check import trainer_check
from skilleval.config.matrix import Matrix
from skilleval.errors import ConfigError
from tests.conftest import REPO, with_trainer

MATRIX = load_matrix("config/ablation/matrix.yaml")


def runs_by_id(matrix: Matrix = MATRIX) -> dict[str, Any]:
    return {r.run_id: r for r in plan(matrix)}


def test_plan_reproduces_the_seed_counts() -> None:
    sections = Counter(r.section for r in plan(MATRIX))
    assert sections["3.1"] == 72  # 24 per new benchmark x 3
    assert sections["3.2"] == 20  # batch 8/24/56/full x 5 benchmarks
    assert sections["3.1"] + sections["3.2"] == 92
    assert sections["3.4"] == 10 and sections["3.5"] == 10  # 8 + the 2 ALFWorld runs of §3.7-3.8
    assert (sections["harness-1"], sections["harness-2"], sections["harness-3"]) == (18, 18, 66)
    assert sum(sections[s] for s in ("harness-1", "harness-2", "harness-3")) == 102
    per_bench = Counter(r.benchmark for r in plan(MATRIX) if r.section == "3.1")
    assert per_bench == {"livemathematicianbench": 24, "alfworld": 24, "docvqa": 24}
    assert sum(r.benchmark == "alfworld" for r in plan(MATRIX)) == 32  # the seed's dry run


def test_seed_arithmetic_disagreement_follows_the_lists() -> None:
    """The seed's step-3 table says DocVQA10 totals 15 and all benchmarks 66, but its
    per-group columns and its run list give DocVQA10 16, and 17 + 17 + 16 + 15 = 65, not
    66. The plan follows the lists: 16 DocVQA10 runs, 66 in all."""
    step3 = Counter(r.harness["benchmark_label"] for r in plan(MATRIX) if r.section == "harness-3")
    assert step3 == {"SearchQA": 17, "Spreadsheet": 17, "LiveMath": 16, "DocVQA10": 16}
    assert sum(step3.values()) == 66 != 17 + 17 + 16 + 15


STEP1 = """HARNESS-Codex-SearchQA-sched-constant HARNESS-Codex-SearchQA-sched-linear
HARNESS-Codex-SearchQA-batch-full HARNESS-Codex-SearchQA-lr8
HARNESS-Codex-Spreadsheet-sched-constant-multi HARNESS-Codex-Spreadsheet-lr4-multi
HARNESS-Codex-Spreadsheet-lr16-multi HARNESS-Codex-Spreadsheet-minibatch16-multi
HARNESS-Codex-LiveMath-lr8 HARNESS-Codex-LiveMath-lr16 HARNESS-Codex-LiveMath-slow10
HARNESS-Codex-LiveMath-sched-linear HARNESS-Codex-LiveMath-minibatch4
HARNESS-Codex-DocVQA10-batch-full HARNESS-Codex-DocVQA10-lr16 HARNESS-Codex-DocVQA10-lr8
HARNESS-Codex-DocVQA10-minibatch32 HARNESS-Codex-DocVQA10-batch24""".split()  # noqa: SIM905
STEP3 = """SearchQA-batch8 SearchQA-batch24 SearchQA-batch56 Spreadsheet-batch8-multi
Spreadsheet-batch24-multi Spreadsheet-batch56-multi Spreadsheet-batch-full-multi LiveMath-batch8
LiveMath-batch24 LiveMath-batch56 LiveMath-batch-full DocVQA10-batch8 DocVQA10-batch56
SearchQA-minibatch1 SearchQA-minibatch2 SearchQA-minibatch4 SearchQA-minibatch16
SearchQA-minibatch32 Spreadsheet-minibatch1-multi Spreadsheet-minibatch2-multi
Spreadsheet-minibatch4-multi Spreadsheet-minibatch32-multi LiveMath-minibatch1 LiveMath-minibatch2
LiveMath-minibatch16 LiveMath-minibatch32 DocVQA10-minibatch1 DocVQA10-minibatch2
DocVQA10-minibatch4 DocVQA10-minibatch16 SearchQA-lr1 SearchQA-lr2 SearchQA-lr4 SearchQA-lr16
Spreadsheet-lr1-multi Spreadsheet-lr2-multi Spreadsheet-lr8-multi LiveMath-lr1 LiveMath-lr2
LiveMath-lr4 DocVQA10-lr1 DocVQA10-lr2 DocVQA10-lr4 Spreadsheet-sched-linear-multi
LiveMath-sched-constant DocVQA10-sched-constant DocVQA10-sched-linear SearchQA-slow5
SearchQA-slow10 SearchQA-slow40 Spreadsheet-slow5-multi Spreadsheet-slow10-multi
Spreadsheet-slow40-multi LiveMath-slow5 LiveMath-slow40 DocVQA10-slow5 DocVQA10-slow10
DocVQA10-slow40 SearchQA-policy-changed SearchQA-policy-unchanged Spreadsheet-policy-changed-multi
Spreadsheet-policy-unchanged-multi LiveMath-policy-changed LiveMath-policy-unchanged
DocVQA10-policy-changed DocVQA10-policy-unchanged""".split()  # noqa: SIM905


def test_every_harness_run_id_of_the_seed_lists() -> None:
    ids = {
        s: {r.run_id for r in plan(MATRIX) if r.section == s}
        for s in ("harness-1", "harness-2", "harness-3")
    }
    assert ids["harness-1"] == set(STEP1)
    assert ids["harness-2"] == {i.replace("-Codex-", "-Claude-") for i in STEP1}
    assert ids["harness-3"] == {f"HARNESS-Codex-{s}" for s in STEP3}


def test_overrides_defaults_reuse_and_full_batch() -> None:
    runs = runs_by_id()
    assert "BATCH-docvqa-40" not in runs and "MBS-alfworld-8" not in runs
    assert "SCHED-alfworld-cosine" not in runs and "MOD-docvqa-both" not in runs
    assert runs["BATCH-docvqa-full"].overrides["train.batch_size"] == 1070
    assert runs["LR-alfworld-4"].overrides == {
        "optimizer.lr_scheduler": "constant",
        "optimizer.min_learning_rate": 1,
        "optimizer.learning_rate": 4,
    }
    lr8 = runs["HARNESS-Claude-SearchQA-lr8"].overrides
    assert lr8["optimizer.learning_rate"] == 8 and lr8["optimizer.min_learning_rate"] == 1
    assert lr8["model.student_backend"] == "claude_code_exec"
    assert lr8["env.skill_init"] == "docs/harness_source_skills/searchqa_best_skill.md"
    assert runs["HARNESS-Codex-DocVQA10-batch-full"].overrides["train.batch_size"] == 107
    spreadsheet = runs["HARNESS-Codex-Spreadsheet-lr4-multi"].overrides
    assert (spreadsheet["env.mode"], spreadsheet["env.workers"]) == ("multi", 4)
    assert runs["SPLIT-docvqa-1shot"].overrides["env.split_dir"] == (
        "data/ablation_splits/docvqa/1shot_seed42"
    )


@pytest.mark.parametrize(
    ("pool", "ratio", "sizes"),
    [
        (177, "1shot", (1, 1, 175)),
        (177, "1-1-8", (18, 18, 141)),
        (177, "2-1-7", (35, 18, 124)),
        (177, "4-1-5", (71, 18, 88)),
        (5349, "1shot", (1, 1, 5347)),
        (5349, "1-1-8", (535, 535, 4279)),
        (5349, "2-1-7", (1070, 535, 3744)),
        (5349, "4-1-5", (2140, 535, 2674)),
    ],
)
def test_ratio_splits_reproduce_the_seed_tables(
    pool: int, ratio: str, sizes: tuple[int, ...]
) -> None:
    got = ratio_sizes(pool, ratio)
    assert (got["train"], got["val"], got["test"]) == sizes


@pytest.mark.parametrize(
    ("train", "batch", "expected"),
    [
        (35, 8, [8, 8, 8, 8, 3]),
        (35, 24, [24, 11]),
        (35, 40, [35]),
        (39, 8, [8, 8, 8, 8, 7]),
        (39, 24, [24, 15]),
        (39, 56, [39]),
    ],
)
def test_batch_logic_matches_the_verified_tables(
    train: int, batch: int, expected: list[int]
) -> None:
    assert batch_sizes(train, batch, 1) == expected


def build(tmp_path: Path, run_id: str, matrix: Matrix) -> dict[str, Any]:
    run = runs_by_id(matrix)[run_id]
    summary = tmp_path / run.summary_path
    build_run(run, matrix, str(summary))
    return audit_run(run, matrix, str(summary))


@pytest.mark.parametrize(
    ("run_id", "plant", "failed_check"),
    [
        # The old 768-token cap is both an undeclared difference and the cause of empty replies.
        (
            "LR-livemathematicianbench-8",
            "empty_responses",
            "only_declared_keys_differ,empty_responses",
        ),
        ("MBS-docvqa-4", "rate_limit", "no_rate_limit_errors"),
        ("SLOWN-alfworld-5", "traceback", "no_crash"),
        ("BATCH-alfworld-8", "oom", "no_crash"),
        ("SCHED-livemathematicianbench-linear", "before_fix", "started_after_fixes"),
        ("HARNESS-Codex-SearchQA-lr8", "wrong_skill", "canonical_source_skill"),
        ("LR-docvqa-8", "undeclared_override", "only_declared_keys_differ"),
    ],
)
def test_planted_failures_are_invalid_for_the_right_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_id: str, plant: str, failed_check: str
) -> None:
    monkeypatch.chdir(tmp_path)
    matrix = with_trainer(MATRIX, plant={run_id: plant})
    audit = build(tmp_path, run_id, matrix)
    assert not audit["valid"]
    assert [c["name"] for c in audit["checks"] if not c["passed"]] == failed_check.split(",")


def test_clean_runs_pass_and_alfworld_progress_bars_are_not_rate_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    audit = build(tmp_path, "BATCH-alfworld-24", MATRIX)
    log = (tmp_path / runs_by_id()["BATCH-alfworld-24"].out_root / "train.log").read_text()
    assert "429/494" in log
    assert audit["valid"], audit["reasons"]


def test_second_writer_of_one_out_root_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from filelock import FileLock

    from skilleval.errors import RunLockedError

    monkeypatch.chdir(tmp_path)
    run = runs_by_id()["LR-docvqa-2"]
    (tmp_path / run.out_root).mkdir(parents=True)
    lock = FileLock(str((tmp_path / run.out_root).parent / f".{run.run_id}.writer.lock"))
    with lock, pytest.raises(RunLockedError, match="one writer per out_root"):
        build_run(run, MATRIX, str(tmp_path / run.summary_path))


# A stand-in for the external scripts/train.py, writing what memo 003 §0 says a real run
# leaves: a nested config.json (as an OmegaConf/Hydra trainer does), a log whose head names
# the model, split, reasoning effort, train size and batch sizes, and summary.json. It
# reads its defaults from the benchmark config and its train size from the split.
STAND_IN_TRAINER = r"""
import datetime, json, math, os, pathlib, sys, yaml
config_file = sys.argv[sys.argv.index("--config") + 1]
config = json.loads(pathlib.Path(config_file).read_text())
for arg in sys.argv[sys.argv.index("--config") + 2 :]:
    key, value = arg.split("=", 1)
    node = config
    *parents, leaf = key.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = yaml.safe_load(value) if value else value
drift = os.environ.get("STAND_IN_DRIFT")
if drift:
    section, leaf = drift.split(".")
    config.setdefault(section, {})[leaf] = True
if os.environ.get("STAND_IN_CRASH"):  # a crash the trainer survives, on stderr only
    print("Traceback (most recent call last):\nRuntimeError: CUDA error", file=sys.stderr)
root = pathlib.Path(config["env"]["out_root"])
train = sum(1 for _ in open(pathlib.Path(config["env"]["split_dir"]) / "train.jsonl"))
step = config["train"]["batch_size"] * config["train"]["accumulation"]
sizes = [min(step, train - i * step) for i in range(math.ceil(train / step))]
(root / "config.json").write_text(json.dumps(config))
(root / "train.log").write_text(
    f"started_at={datetime.datetime.now(datetime.UTC).isoformat()}\n"
    f"model.student={config['model']['student']} reasoning={config['model']['reasoning_effort']}\n"
    f"split_dir={config['env']['split_dir']}\ntrain_size={train}\nbatch_sizes={sizes}\n"
)
(root / "summary.json").write_text(json.dumps({
    "best_selection_score": 0.9, "base_score": 0.8, "best_test_score": 0.85, "tokens": 10,
    "steps": 4, "empty_response_fraction": 0.01, "argv": sys.argv[1:],
}))
"""


def stand_in_checkout(root: Path, matrix: Matrix, runs: Iterable[PlannedRun]) -> None:
    """A trainer checkout for ``runs``: the stand-in script, each benchmark's default
    config (nested), and every split folder a run reads, with its train size."""
    (root / "scripts").mkdir(parents=True, exist_ok=True)
    (root / "scripts" / "train.py").write_text(STAND_IN_TRAINER)
    for run in runs:
        bench = matrix.benchmarks[run.benchmark]
        defaults = root / bench.config
        if not defaults.exists():
            nested: dict[str, Any] = {}
            for key, value in benchmark_defaults(matrix, run.benchmark).items():
                node = nested
                *parents, leaf = key.split(".")
                for part in parents:
                    node = node.setdefault(part, {})
                node[leaf] = value
            defaults.parent.mkdir(parents=True, exist_ok=True)
            defaults.write_text(json.dumps(nested))
        config = effective_config(run, matrix)
        split = root / config["env.split_dir"]
        split.mkdir(parents=True, exist_ok=True)
        (split / "train.jsonl").write_text("{}\n" * train_size_of(config, bench))


def command_trainer(tmp_path: Path, bench: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The matrix with the command trainer pointed at a stand-in checkout, run from
    ``tmp_path`` (where the runs' relative out_roots land)."""
    checkout = tmp_path / "trainer"
    matrix = with_trainer(MATRIX, kind="command", python=sys.executable, root=str(checkout))
    stand_in_checkout(checkout, matrix, (r for r in plan(matrix) if r.benchmark == bench))
    monkeypatch.chdir(tmp_path)
    return matrix


def test_the_command_trainer_is_launched_and_audited_as_a_real_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    matrix = command_trainer(tmp_path, "docvqa", monkeypatch)
    run = runs_by_id(matrix)["LR-docvqa-8"]
    summary = build_run(run, matrix, run.summary_path)
    out_root = Path(run.out_root)
    assert summary["delta"] == pytest.approx(0.05) and summary["trainer"] == "command"
    assert summary["single_writer"] is True
    assert "no other live process" in summary["provenance"]["writers"]["single_writer_detail"]
    # The workflow's own launch files lie beside the out_root, never in it.
    command = (out_root.parent / f"{out_root.name}.command.sh").read_text()
    assert shlex.split(command)[1:] == trainer_command(run, matrix, out_root)[1:]
    assert not (out_root / "command.sh").exists()
    assert json.loads((out_root / "trainer_summary.json").read_text())["argv"][-1] == (
        f"env.out_root={out_root.resolve()}"
    )
    checks = {c["name"]: c for c in audit_run(run, matrix, run.summary_path)["checks"]}
    failing = {n: c["detail"] for n, c in checks.items() if not c["passed"]}
    assert failing == {}
    assert "train.log line 4" in checks["batch_logic"]["detail"]
    assert "train.log line 1" in checks["started_after_fixes"]["detail"]
    # The same run, but the trainer's config drifted from the default in a key the run
    # does not declare.
    monkeypatch.setenv("STAND_IN_DRIFT", "optimizer.use_meta_reflect")
    drifted = runs_by_id(matrix)["LR-docvqa-2"]
    build_run(drifted, matrix, drifted.summary_path)
    audit = audit_run(drifted, matrix, drifted.summary_path)
    assert not audit["valid"]
    assert [r.split(":")[0] for r in audit["reasons"]] == ["only_declared_keys_differ"]
    assert "optimizer.use_meta_reflect" in audit["reasons"][0]


def built_command_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Matrix, PlannedRun, Path]:
    """LR-docvqa-8 built by the command trainer on a stand-in checkout, and its out_root."""
    matrix = command_trainer(tmp_path, "docvqa", monkeypatch)
    run = runs_by_id(matrix)["LR-docvqa-8"]
    build_run(run, matrix, run.summary_path)
    return matrix, run, Path(run.out_root).resolve()


def trainer_check_cli(out_root: Path, matrix: Matrix, tmp_path: Path) -> Any:
    import subprocess

    import yaml

    (tmp_path / "matrix.yaml").write_text(yaml.safe_dump(matrix.settings()))
    command = [sys.executable, "-m", "skilleval.cli", "trainer", "check", str(out_root)]
    return subprocess.run(
        [*command, "--matrix", str(tmp_path / "matrix.yaml")],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parent.parent,
    )


def test_trainer_check_says_which_audit_checks_a_trainers_output_allows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    matrix, run, out_root = built_command_run(tmp_path, monkeypatch)
    passed = trainer_check_cli(out_root, matrix, tmp_path)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "can    batch_logic: train size from" in passed.stdout
    assert "can    started_after_fixes: start from" in passed.stdout
    # A trainer whose log head lacks the batch line: the check it cannot compute, named.
    log = out_root / "train.log"
    kept = [line for line in log.read_text().splitlines(True) if "batch_sizes" not in line]
    log.write_text("".join(kept))
    failed = trainer_check_cli(out_root, matrix, tmp_path)
    assert failed.returncode == 1, failed.stdout
    assert (
        f"cannot batch_logic: the log head ({log}, first 50 lines) has no line matching "
        "trainer.contract.log_lines.batch_sizes" in failed.stdout
    )
    assert "14 of 15 audit checks can be computed; the audit would fail batch_logic" in (
        failed.stdout
    )
    # A lab whose trainer says it another way declares the line; the audit follows.
    log.write_text(log.read_text() + "steps of one epoch: [40, 40, 40, 40, 40]\n")
    lab = with_trainer(
        matrix, contract={"log_lines": {"batch_sizes": r"steps of one epoch: \[(.*)\]"}}
    )
    declared = trainer_check_cli(out_root, lab, tmp_path)
    assert "can    batch_logic" in declared.stdout, declared.stdout
    checks = {c["name"]: c for c in audit_run(run, lab, run.summary_path)["checks"]}
    assert "batches from" in checks["batch_logic"]["detail"]
    # A trainer that does not report its empty responses: named, and failed, never 0 %.
    summary = Path(run.summary_path)
    recorded = json.loads(summary.read_text())
    summary.write_text(json.dumps({**recorded, "empty_response_fraction": None}))
    kept = out_root / "trainer_summary.json"
    kept.write_text(json.dumps({**json.loads(kept.read_text()), "empty_response_fraction": None}))
    silent = trainer_check_cli(out_root, lab, tmp_path)
    assert "cannot empty_responses" in silent.stdout and silent.returncode == 1
    audit = audit_run(run, lab, run.summary_path)
    assert any(
        r.startswith("empty_responses: the trainer did not report") for r in audit["reasons"]
    )


def test_trainer_check_gives_the_audit_s_verdict_not_only_what_it_can_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    matrix, _, out_root = built_command_run(tmp_path, monkeypatch)
    valid = trainer_check_cli(out_root, matrix, tmp_path)
    assert valid.returncode == 0 and "the audit's verdict on it as run LR-docvqa-8:" in valid.stdout
    assert "  pass batch_logic: " in valid.stdout and valid.stdout.rstrip().endswith("valid")
    # Batch sizes that contradict the config: readable, so computable, and failing.
    log = out_root / "train.log"
    logged = log.read_text()
    log.write_text(re.sub(r"batch_sizes=\[.*\]", "batch_sizes=[7, 7]", logged))
    wrong = trainer_check_cli(out_root, matrix, tmp_path)
    assert wrong.returncode == 1
    assert "can    batch_logic" in wrong.stdout and "  FAIL batch_logic: " in wrong.stdout
    assert "15 of 15 audit checks can be computed" in wrong.stdout
    assert wrong.stdout.rstrip().endswith("invalid: batch_logic failed")
    # A launch by hand, outside the workflow: judged as the run it is named for.
    trial = tmp_path / "trial"
    trial.mkdir()
    (trial / "summary.json").write_text((out_root / "trainer_summary.json").read_text())
    config = json.loads((out_root / "config.json").read_text())
    config["env"]["out_root"] = str(trial)
    (trial / "config.json").write_text(json.dumps(config))
    (trial / "train.log").write_text(logged)
    unnamed = trainer_check_cli(trial, matrix, tmp_path)
    assert unnamed.returncode == 1 and "not judged: " in unnamed.stdout
    assert "--run RUN_ID" in unnamed.stdout
    command = [sys.executable, "-m", "skilleval.cli", "trainer", "check", str(trial)]
    named = subprocess.run(
        [*command, "--matrix", str(tmp_path / "matrix.yaml"), "--run", "LR-docvqa-8"],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    assert named.returncode == 0, named.stdout
    assert "not judged here: single_writer" in named.stdout
    config["env"]["out_root"] = str(out_root)  # another run's folder
    (trial / "config.json").write_text(json.dumps(config))
    shared = subprocess.run(
        [*command, "--matrix", str(tmp_path / "matrix.yaml"), "--run", "LR-docvqa-8"],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    assert shared.returncode == 1 and "  FAIL unique_out_root: " in shared.stdout


def test_an_out_root_started_before_a_fix_is_flagged_from_the_trainer_s_own_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    matrix = command_trainer(tmp_path, "livemathematicianbench", monkeypatch)
    fix = next(f for f in matrix.invalid_rules.fixes if "livemathematicianbench" in f.benchmarks)
    run = runs_by_id(matrix)["LR-livemathematicianbench-8"]
    summary = build_run(run, matrix, run.summary_path)
    launched = summary["provenance"]["started_at"]
    log = Path(run.out_root) / "train.log"
    # Before the fix; before this launch (an earlier run's log left in the out_root); as
    # the trainer itself wrote it.
    for stamp, wrong in (
        ("2026-01-01T00:00:00+00:00", f"before fix(es) ['{fix.name}']"),
        ("2026-05-01T00:00:00+00:00", f"before the workflow launched it at {launched}"),
        (launched, None),
    ):
        text = log.read_text().splitlines()
        log.write_text("\n".join([f"started_at={stamp}", *text[1:]]) + "\n")
        check = next(
            c
            for c in audit_run(run, matrix, run.summary_path)["checks"]
            if c["name"] == "started_after_fixes"
        )
        assert check["passed"] is (wrong is None), check
        assert wrong is None or wrong in check["detail"]


def test_a_crash_the_trainer_printed_only_on_stderr_makes_the_run_invalid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trainer exits 0 after a Traceback on stderr; its declared log says nothing of it."""
    matrix = command_trainer(tmp_path, "docvqa", monkeypatch)
    run = runs_by_id(matrix)["LR-docvqa-8"]
    monkeypatch.setenv("STAND_IN_CRASH", "1")
    build_run(run, matrix, run.summary_path)
    assert "Traceback" not in (Path(run.out_root) / "train.log").read_text()
    audit = audit_run(run, matrix, run.summary_path)
    assert not audit["valid"]
    crash = next(r for r in audit["reasons"] if r.startswith("no_crash:"))
    printed = launch_files(Path(run.out_root))[1]
    assert f"found 'Traceback (most recent call last)' in {printed}" in crash


def test_a_truncated_yaml_config_is_named_as_truncated_by_the_audit_and_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cut mid-line, a YAML file still parses; its lost keys must not be the reason given."""
    import yaml

    matrix, run, out_root = built_command_run(tmp_path, monkeypatch)
    whole = yaml.safe_dump(json.loads((out_root / "config.json").read_text()))
    # Cut inside the batch size's value: 40 would read as 4, the rest of the keys lost.
    cut = whole[: whole.index("\n  batch_size: ") + len("\n  batch_size: ") + 1]
    assert yaml.safe_load(cut)["train"]["batch_size"] == 4  # it parses, and lies
    (out_root / "hparams.yaml").write_text(cut)
    lab = with_trainer(matrix, contract={"config_file": "hparams.yaml"})
    audit = audit_run(run, lab, run.summary_path)
    assert not audit["valid"]
    assert audit["reasons"] == [audit["reasons"][0]]  # one reason: the truncation
    assert audit["reasons"][0].startswith(f"trainer_output_readable: {run.out_root}/hparams.yaml")
    assert "hparams.yaml: truncated: it ends in the middle of line" in audit["reasons"][0]
    checked = trainer_check_cli(out_root, lab, tmp_path)
    assert checked.returncode == 1
    assert "hparams.yaml: truncated: it ends in the middle of line" in checked.stdout
    (out_root / "hparams.yaml").write_text(whole)
    assert audit_run(run, lab, run.summary_path)["valid"]


def test_bad_matrix_is_refused_with_the_key() -> None:
    import yaml

    from skilleval.config.schema import validate_against_schema

    matrix = yaml.safe_load(Path("config/ablation/matrix.yaml").read_text())
    matrix["groups"]["lr"]["section"] = "3.9"
    with pytest.raises(ConfigError) as info:
        validate_against_schema(matrix, "ablation", "config/ablation/matrix.yaml")
    assert info.value.key == "groups.lr.section" and info.value.value == "3.9"


def test_a_key_the_schema_lets_through_but_the_model_refuses_is_named(tmp_path: Path) -> None:
    # A batch size written as a word: JSON Schema cannot type a mapping's keys.
    seed = Path("config/ablation/matrix.yaml").read_text()
    old = "verified_batches: {8: [8, 8, 8, 8, 3],"
    assert old in seed
    (tmp_path / "matrix.yaml").write_text(
        seed.replace(old, "verified_batches: {eight: [8, 8, 8, 8, 3],")
    )
    with pytest.raises(ConfigError) as info:
        load_matrix(tmp_path / "matrix.yaml")
    assert info.value.key == "benchmarks.livemathematicianbench.verified_batches.eight"
    assert info.value.value == "eight" and "matrix.yaml, line " in info.value.file


def test_token_counts_read_as_people_write_them() -> None:
    from skilleval.report.ablation_tables import human_count

    assert [human_count(x) for x in (48_000, 3_200_000, 999, 0, None, float("nan"))] == [
        "48k",
        "3.2M",
        "999",
        "0",
        "n/a",
        "n/a",
    ]


def test_trainer_check_dates_a_log_without_a_start_line_as_the_audit_does(tmp_path: Path) -> None:
    """No start line: the audit takes the time the trainer wrote its config (RunFiles.started)."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"train": {"batch_size": 8, "accumulation": 1}}))
    (tmp_path / "train.log").write_text("train_size=80\nbatch_sizes=[8]\n")
    found = {c.check: c for c in trainer_check(tmp_path, TrainerContract())}
    assert found["batch_logic"].computable, found["batch_logic"].detail
    assert found["started_after_fixes"].computable
    assert f"the modification time of {config}" in found["started_after_fixes"].detail
    config.unlink()
    found = {c.check: c for c in trainer_check(tmp_path, TrainerContract())}
    assert not found["started_after_fixes"].computable
