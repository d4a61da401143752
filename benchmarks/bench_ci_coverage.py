"""Empirical coverage of the contrast CI against the default world's ground truth.

Replicates the s0-gain contrast (base+S0 minus base-free on the 400 test tasks) under
many runtime seeds; each replicate redraws all episode randomness. The truth is the
exact expected difference over the same tasks. Prints the share of 95% intervals that
contain it (should sit near 0.95). Usage: python benchmarks/bench_ci_coverage.py [N]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

from skilleval.analysis.bootstrap import align, paired_bootstrap
from skilleval.policy.sim import SimPolicy
from skilleval.runs.rollout import run_episode
from skilleval.skills.bank import load_bank, system_prompt
from skilleval.world.design import bank_design, checkpoint_design
from skilleval.world.generate import (
    ground_truth,
    outcome_table,
    write_bank,
    write_checkpoint,
    write_tasks,
)
from skilleval.world.shopsim import ShopWorld, Task, catalogue_from_json

SEED, TEMPERATURE, MAX_STEPS = 20260901, 0.6, 30


def main(replicates: int) -> None:
    import json

    root = Path(tempfile.mkdtemp(prefix="coverage-"))
    write_tasks(SEED, 8, 60, {"test": 400}, root / "catalogue.json", root / "splits.json")
    write_checkpoint(SEED, "base", root / "base.safetensors", checkpoint_design(0, 2))
    write_bank(SEED, "S0", root / "S0.md", bank_design("S0", "initial", 10))
    tasks = [Task.from_json(t) for t in json.loads((root / "splits.json").read_text())["test"]]
    world = ShopWorld(
        catalogue_from_json(json.loads((root / "catalogue.json").read_text()), "catalogue.json"),
        tasks,
    )
    tensors = load_file(str(root / "base.safetensors"))
    bank = load_bank(root / "S0.md")
    truth = ground_truth(
        {"test": outcome_table(world, tasks, MAX_STEPS)},
        {"base": tensors},
        {"S0": bank},
        TEMPERATURE,
    )["splits"]["test"]["base"]["banks"]["S0"]
    prompts = {"free": system_prompt([]), "S0": system_prompt(bank)}
    covered, widths, estimates = 0, [], []
    start = time.perf_counter()
    for replicate in range(replicates):
        rewards = {}
        for arm, prompt in prompts.items():
            policy = SimPolicy(
                tensors, TEMPERATURE, 4096, False, f"{arm}-{replicate}", task_seed=replicate
            )
            rewards[arm] = {
                t.task_id: run_episode(policy, world, t.task_id, prompt, MAX_STEPS).rewards[
                    "reward"
                ]
                for t in tasks
            }
        result = paired_bootstrap(
            align(rewards["free"], rewards["S0"], ("free", "S0")),
            rng=np.random.default_rng(replicate),
            n_resamples=2000,
        )
        covered += result.ci_low <= truth <= result.ci_high
        widths.append(result.ci_high - result.ci_low)
        estimates.append(result.estimate)
    elapsed = time.perf_counter() - start
    rate = covered / replicates
    mc_error = np.sqrt(rate * (1 - rate) / replicates)
    print(f"s0-gain on base, 400 test tasks, {replicates} replicates ({elapsed:.0f} s)")
    print(
        f"  true effect {truth:+.4f}; mean estimate {np.mean(estimates):+.4f} "
        f"(sd {np.std(estimates):.4f}); mean CI width {np.mean(widths):.4f}"
    )
    print(f"  empirical coverage of nominal 95% CI: {rate:.3f} +/- {mc_error:.3f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
