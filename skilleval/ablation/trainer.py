"""Trainers that build one ablation run: the external ``scripts/train.py`` or a simulation.

Both write the same artifacts into the run's unique out_root: ``config.json`` (the
effective config; a real OmegaConf/Hydra trainer nests it), a log whose head names the
model, split, reasoning effort, train size and batch sizes (memo 003 §0), per-step
records and ``summary.json``. The workflow's own files of a launch (the command line, the
trainer's captured output) go beside the out_root, never into it. The sim trainer is a
seeded model of training whose outcome depends on the settings, and it can plant the
failure modes the memo ran into, so the audit and the invalid-run rules are exercised on
the default path.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import shlex
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
from filelock import FileLock, Timeout

from skilleval.ablation.contract import KEPT_RESULTS_FILE, SCORE_KEYS, TrainerContract
from skilleval.ablation.plan import PlannedRun, effective_config, plan_fingerprint
from skilleval.ablation.ratios import RATIOS, ratio_sizes
from skilleval.ablation.trainer_files import move_aside, read_mapping
from skilleval.config.matrix import Benchmark, Matrix
from skilleval.errors import RunLockedError, SkillevalError
from skilleval.records.ablation import AblationSummary
from skilleval.records.provenance import provenance
from skilleval.storage import atomic
from skilleval.storage.hashing import canonical_hash
from skilleval.storage.writers import out_root_writers

log = logging.getLogger(__name__)
BASE_SCORE = {
    "searchqa": 0.80,
    "spreadsheetbench": 0.70,
    "livemathematicianbench": 0.55,
    "alfworld": 0.45,
    "docvqa": 0.86,
}
TOKENS_NEEDED = {"livemathematicianbench": 12_000, "alfworld": 1_500}
TOKENS_PER_ITEM = {
    "searchqa": 9_000,
    "spreadsheetbench": 40_000,
    "livemathematicianbench": 30_000,
    "alfworld": 60_000,
    "docvqa": 12_000,
}


def batch_sizes(train_size: int, batch_size: int, accumulation: int) -> list[int]:
    """Sizes of one epoch's steps: steps_per_epoch = ceil(train / (batch * accumulation))."""
    per_step = batch_size * accumulation
    steps = math.ceil(train_size / per_step)
    return [min(per_step, train_size - i * per_step) for i in range(steps)]


def train_size_of(config: dict[str, Any], bench: Benchmark) -> int:
    """Train size of the split the config points to (ratio splits by the seed's rule)."""
    split = str(config["env.split_dir"])
    for ratio in RATIOS:
        if f"/{ratio}_" in split:
            if bench.pool is None:
                return (bench.ratio_train or {})[ratio]
            return ratio_sizes(bench.pool, ratio)["train"]
    return bench.sizes.train


def sim_outcome(
    run: PlannedRun, config: dict[str, Any], train_size: int, seed: int
) -> dict[str, Any]:
    rng = np.random.default_rng([seed, int(canonical_hash(run.run_id)[:8], 16)])
    bench = run.benchmark
    lr = float(config["optimizer.learning_rate"])
    mode = config["optimizer.lr_control_mode"]
    lr_term = {"autonomous": 0.9, "none": 0.6}.get(
        mode, math.exp(-((math.log2(lr) - 2.6) ** 2) / 4)
    )
    steps_per_epoch = len(
        batch_sizes(train_size, int(config["train.batch_size"]), int(config["train.accumulation"]))
    )
    steps = int(config["train.num_epochs"]) * steps_per_epoch
    step_term = 1 - math.exp(-steps / 6)
    mb_term = 1 - 0.15 * abs(math.log2(int(config["gradient.minibatch_size"]) / 8)) / 2
    sched_term = {"cosine": 1.0, "linear": 0.97, "constant": 0.95}[config["optimizer.lr_scheduler"]]
    slow_term = (
        (0.9 + 0.1 * min(1.0, int(config["optimizer.slow_update_samples"]) / 20))
        * (1.0 if config["optimizer.use_slow_update"] else 0.85)
        * (1.0 if config["optimizer.use_meta_skill"] else 0.9)
    )
    policy_term = {"mixed": 1.0, "changed": 1.02, "unchanged": 0.95}[
        config["optimizer.longitudinal_pair_policy"]
    ]
    student = config["model.student"]
    base = BASE_SCORE[bench] - {"gpt-5.4-mini": 0.08, "gpt-5.4-pro": 0.02}.get(student, 0.0)
    gain = 0.08 * lr_term * step_term * mb_term * sched_term * slow_term * policy_term
    gain *= 0.7 if student == "gpt-5.4-mini" else 1.0
    if run.harness:
        base += 0.04
        gain *= 1.1 if run.harness["backend"] == "Codex" else 0.9
    best_test = float(np.clip(base + gain + rng.normal(0, 0.01), 0, 1))
    trajectory = [
        float(np.clip(base + gain * (1 - math.exp(-(s + 1) / 3)) + rng.normal(0, 0.01), 0, 1))
        for s in range(steps)
    ]
    best_step = int(np.argmax(trajectory))
    needed = TOKENS_NEEDED.get(bench, 2_000)
    empty = max(0.0, (needed - int(config["model.max_tokens"])) / needed)
    tokens = int(steps * min(int(config["train.batch_size"]), train_size) * TOKENS_PER_ITEM[bench])
    return {
        "base_score": base,
        "best_test_score": best_test,
        "trajectory": trajectory,
        "best_step": best_step,
        "steps": steps,
        "steps_per_epoch": steps_per_epoch,
        "tokens": tokens,
        "empty_response_fraction": round(empty, 4),
    }


PLANTED_LOG = {
    "rate_limit": "openai.RateLimitError: Error code: 429 - "
    "{'error': {'code': 'too_many_requests'}}",
    "traceback": "Traceback (most recent call last):\n"
    "  File \"reflect.py\", line 88\nKeyError: 'action'",
    "oom": "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low "
    "on memory.\nKilled",
}


def write_trainer_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def run_sim(run: PlannedRun, matrix: Matrix, out_root: Path) -> dict[str, Any]:
    config = effective_config(run, matrix)
    planted = matrix.trainer.plant.get(run.run_id)
    if planted == "empty_responses":
        config["model.max_tokens"] = 768
    if planted == "wrong_skill":
        config["env.skill_init"] = f"outputs/{run.run_id}/best_skill.md"
    if planted == "undeclared_override":
        config["optimizer.use_meta_reflect"] = True
    sizes = matrix.benchmarks[run.benchmark].sizes
    train_size = train_size_of(config, matrix.benchmarks[run.benchmark])
    outcome = sim_outcome(run, config, train_size, matrix.trainer.seed)
    if planted == "empty_responses":
        outcome["empty_response_fraction"] = max(outcome["empty_response_fraction"], 0.9)
    started = dt.datetime.now(dt.UTC)
    if planted == "before_fix":
        started = dt.datetime(2026, 5, 3, 12, 0, tzinfo=dt.UTC)
    # The trainer's own files, written as a trainer process writes them (no fsync per step
    # file: a kill re-runs the whole run, and the job's summary is the record).
    write_trainer_json(out_root / "config.json", config)
    sizes_epoch = batch_sizes(
        train_size, int(config["train.batch_size"]), int(config["train.accumulation"])
    )
    # The head memo 003 §0 checks after a launch, then the whole config.
    lines = [
        f"[start] {started.isoformat()}",
        f"[model] teacher={config.get('model.teacher')} student={config.get('model.student')} "
        f"reasoning_effort={config.get('model.reasoning_effort')}",
        f"[split] mode={config.get('env.split_mode')} dir={config.get('env.split_dir')}",
        f"[data] train={train_size} val={sizes.val} test={sizes.test}",
        f"[batch] steps_per_epoch={len(sizes_epoch)} batch_sizes={sizes_epoch}",
    ]
    lines += [f"[config] {k}={v}" for k, v in sorted(config.items())]
    for step, score in enumerate(outcome["trajectory"]):
        write_trainer_json(
            out_root / "steps" / f"step_{step + 1:04d}.json",
            {"step": step + 1, "selection_score": score},
        )
        lines.append(
            f"[step {step + 1}] selection={score:.4f} rollout {step + 1}/{outcome['steps']}"
        )
        if run.benchmark == "alfworld":
            lines.append("rollout progress: 429/494 episodes")  # a progress bar, not a 429
    if planted in PLANTED_LOG:
        lines.append(PLANTED_LOG[planted])
    (out_root / "train.log").write_text("\n".join(lines) + "\n")
    selection = outcome["trajectory"][outcome["best_step"]]
    return {
        "best_selection_score": selection,
        "base_score": outcome["base_score"],
        "best_test_score": outcome["best_test_score"],
        "delta": outcome["best_test_score"] - outcome["base_score"],
        "tokens": outcome["tokens"],
        "steps": outcome["steps"],
        "steps_per_epoch": outcome["steps_per_epoch"],
        "batch_sizes": sizes_epoch,
        "train_size": train_size,
        "empty_response_fraction": outcome["empty_response_fraction"],
        "started_at": started.isoformat(),
    }


def trainer_command(run: PlannedRun, matrix: Matrix, out_root: Path) -> list[str]:
    """The seed's launch line: python scripts/train.py --config CFG key=value ... out_root."""
    trainer = matrix.trainer
    bench = matrix.benchmarks[run.benchmark]
    args = [trainer.python, trainer.script, "--config", bench.config]
    for key, value in run.overrides.items():
        text = json.dumps(value) if isinstance(value, bool) else str(value)
        args.append(f"{key}={text.lower() if isinstance(value, bool) else text}")
    args.append(f"env.out_root={out_root.resolve()}")
    return args


def launch_files(out_root: Path) -> tuple[Path, Path]:
    """The workflow's own files of a command-trainer launch, beside the out_root: the
    command line and the trainer's captured output."""
    return out_root.parent / f"{out_root.name}.command.sh", out_root.parent / f"{out_root.name}.out"


def run_command(run: PlannedRun, matrix: Matrix, out_root: Path) -> dict[str, Any]:
    command = trainer_command(run, matrix, out_root)
    command_file, output_file = launch_files(out_root)
    atomic.write_text(command_file, shlex.join(command) + "\n")
    started = dt.datetime.now(dt.UTC)
    with open(output_file, "w") as output:
        done = subprocess.run(
            command, cwd=matrix.trainer.root, stdout=output, stderr=subprocess.STDOUT
        )
    if done.returncode != 0:
        raise SkillevalError(
            f"trainer exited with {done.returncode} for {run.run_id}; see {output_file}"
        )
    produced = out_root / TrainerContract.of(matrix).results_file
    if not produced.exists():
        raise SkillevalError(
            f"trainer wrote no {produced} (trainer.contract.results_file); cannot fill the "
            f"table for {run.run_id}"
        )
    raw = read_mapping(produced)
    try:
        result: dict[str, Any] = {key: float(raw[key]) for key in SCORE_KEYS}
    except KeyError as missing:
        raise SkillevalError(f"{produced}: trainer summary lacks {missing}") from None
    except (TypeError, ValueError):
        values = {key: raw[key] for key in SCORE_KEYS}
        raise SkillevalError(f"{produced}: the scores are not all numbers: {values}") from None
    result["delta"] = result["best_test_score"] - result["base_score"]
    result.update(
        {
            k: raw.get(k)
            for k in (
                "tokens",
                "steps",
                "steps_per_epoch",
                "batch_sizes",
                "train_size",
                "empty_response_fraction",
            )
        }
    )
    result["started_at"] = started.isoformat()
    produced.rename(out_root / KEPT_RESULTS_FILE)
    return result


def build_run(run: PlannedRun, matrix: Matrix, summary_path: str) -> dict[str, Any]:
    out_root = Path(summary_path).parent
    out_root.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(out_root.parent / Path(run.lock_path).name))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise RunLockedError(
            f"{out_root} is being written by another process; one writer per "
            "out_root (a second writer voids the run)"
        ) from None
    try:
        kind = matrix.trainer.kind
        writers = out_root_writers(out_root)
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S.%fZ")
        earlier = move_aside(out_root, list(launch_files(out_root)), stamp)
        if earlier is not None:
            log.info("ablation run %s: an earlier launch's files moved to %s", run.run_id, earlier)
        result = (
            run_sim(run, matrix, out_root) if kind == "sim" else run_command(run, matrix, out_root)
        )
        # When the run happened is provenance: the audit reads started_at from there.
        timing = {
            "started_at": result.pop("started_at"),
            "finished_at": dt.datetime.now(dt.UTC).isoformat(),
        }
        summary = {
            "run_id": run.run_id,
            **run.as_json(),
            **result,
            "trainer": kind,
            "simulated": {"simulated": True, "by": "the sim trainer"}
            if kind == "sim"
            else {"simulated": False, "by": f"the trainer command {matrix.trainer.script}"},
            "single_writer": writers["single_writer"],
            "plan_fingerprint": plan_fingerprint(run, matrix),
            # What the job saw of other writers (hosts, pids): provenance, like its timing.
            "provenance": {**provenance(), **timing, "writers": writers},
        }
        AblationSummary.create(**summary).write(summary_path)
        return summary
    finally:
        lock.release()
