"""Coverage study: are the paper's 95% intervals 95% intervals?

The default world (seeds of config/config.yaml, full size) is fixed, and with it the
ground truth: for every task the exact expected reward of each checkpoint x bank (and of
each Gate A mask), from the world's outcome table. Each replicate re-simulates the runs
with a fresh runtime seed, exactly as the workflow runs them (same policy, same salt,
arms of one replicate sharing their runtime seed), and asks whether each interval covers
the truth:

* the five main contrasts, truth = mean over the 400 test tasks of the exact expected
  paired difference; percentile and BCa paired bootstrap intervals;
* the 16 Gate A betas of the memo's model (no intercept), truth = the least-squares
  coefficients of the exact expected deltas on the fixed mask design (what that model
  estimates); t intervals from naive OLS and from task-clustered (CR1) standard errors;
* the same betas against each chunk's own effect (the coefficients of the same least
  squares with an intercept), for the memo's fit and for the fit with an intercept, and
  that fit's intercept against the common effect of a skills section.

A world with a common effect: SECTION_SHIFT=<logit shift> (world.skills_section_shift).
It prints the effect's size on reward, the memo betas' mean offset from the chunks' own
effects, and the offset the design predicts (common effect x mean loading).

Replicates run in parallel (one process per core). Prints the coverage table (method x
quantity -> coverage +/- Monte Carlo error) and writes paper/figures/coverage_study.{pdf,png}.
Asserts nothing. Usage:
  [SECTION_SHIFT=0.2] python benchmarks/bench_coverage_study.py [contrast_reps] [gate_reps]
SKILLEVAL_BENCH_SIZE=tiny runs two replicates of each on a small world and draws the figure
in a temporary folder.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.stats
import yaml

from skilleval.analysis.bootstrap import align, paired_bootstrap
from skilleval.analysis.design import build_design
from skilleval.analysis.gate import common_effect_loading, fit_gate
from skilleval.env.rollout import run_episode
from skilleval.skills.bank import Prompt, Skill, load_bank
from skilleval.world.design import world_design
from skilleval.world.generate import (
    checkpoint_tensors,
    expected_reward,
    outcome_table,
    write_bank,
    write_tasks,
)
from skilleval.world.shopsim import ShopWorld, Task, catalogue_from_json
from skilleval.world.sim_policy import (
    SimPolicy,
    decision_probabilities,
    section_shift_of,
    skill_shifts,
    weights_salt,
)

REPO = Path(__file__).resolve().parent.parent
PROMPT = Prompt.load(
    str(REPO / "config/prompts/shop-assistant.system.txt"), str(REPO / "config/prompts/skills.j2")
)
TINY = os.environ.get("SKILLEVAL_BENCH_SIZE") == "tiny"
N_RESAMPLES = 200 if TINY else 2000
WORLD: dict[str, Any] = {}


def build_world() -> dict[str, Any]:
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["world"]["skills_section_shift"] = float(os.environ.get("SECTION_SHIFT", "0"))
    if TINY:
        config["world"]["split_sizes"] = {"train": 20, "val": 40, "test": 40}
    world, protocol = config["world"], config["protocols"]["local-sglang"]
    root = Path(tempfile.mkdtemp(prefix="coverage-study-"))
    write_tasks(
        world["seed"],
        world["categories"],
        world["products_per_category"],
        world["split_sizes"],
        root / "catalogue.json",
        root / "splits.json",
    )
    design = world_design(config)
    banks: dict[str, list[Skill]] = {}
    for name, bank in design.banks.items():
        write_bank(world["seed"], name, root / f"{name}.md", bank)
        banks[name] = load_bank(root / f"{name}.md")
    splits = json.loads((root / "splits.json").read_text())
    tasks = {s: [Task.from_json(t) for t in splits[s]] for s in ("val", "test")}
    catalogue = catalogue_from_json(json.loads((root / "catalogue.json").read_text()), "c")
    shop = ShopWorld(catalogue, tasks["val"] + tasks["test"])
    runtime, sampling = protocol["runtime"], protocol["sampling"]
    return {
        "config": config,
        "shop": shop,
        "tasks": tasks,
        "tensors": {
            name: {k: v for k, v in checkpoint_tensors(world["seed"], d).items() if "policy" in k}
            for name, d in design.checkpoints.items()
        },
        "banks": banks,
        "tables": {s: outcome_table(shop, tasks[s], runtime["max_steps"]) for s in tasks},
        "sampling": sampling,
        "max_steps": runtime["max_steps"],
    }


def exact_rewards(checkpoint: str, skills: list[Skill], split: str, rows: Any = None) -> Any:
    """Per-task exact expected reward of a checkpoint with these skills injected."""
    tensors = WORLD["tensors"][checkpoint]
    probs = decision_probabilities(
        np.asarray(tensors["policy.decision_logits"], dtype=np.float64),
        float(tensors["policy.skill_receptivity"][0]),
        skill_shifts([h for s in skills for h in s.hints], section_shift_of(tensors)),
        WORLD["sampling"]["temperature"],
    )
    table = WORLD["tables"][split] if rows is None else WORLD["tables"][split][rows : rows + 1]
    return expected_reward(table, probs)


def simulate(checkpoint: str, prompts: dict[str, str], seed: int) -> dict[str, float]:
    tensors = WORLD["tensors"][checkpoint]
    sampling = WORLD["sampling"]
    policy = SimPolicy(
        tensors,
        sampling["temperature"],
        sampling["max_tokens"],
        sampling["enable_thinking"],
        weights_salt(tensors),
        task_seed=seed,
    )
    return {
        task: run_episode(policy, WORLD["shop"], task, prompt, WORLD["max_steps"]).rewards["reward"]
        for task, prompt in prompts.items()
    }


def run_skills(run: dict[str, Any]) -> list[Skill]:
    return WORLD["banks"][run["bank"]] if run["bank"] else []


def contrast_truths() -> dict[str, float]:
    config = WORLD["config"]
    truths = {}
    for name, contrast in config["contrasts"].items():
        control, treatment = (config["runs"][contrast[r]] for r in ("control", "treatment"))
        effect = exact_rewards(treatment["checkpoint"], run_skills(treatment), "test") - (
            exact_rewards(control["checkpoint"], run_skills(control), "test")
        )
        truths[name] = float(np.mean(effect))
    return truths


def contrast_replicate(replicate: int) -> dict[tuple[str, str], Any]:
    config, seed = WORLD["config"], 1_000_000 + replicate
    task_ids = [t.task_id for t in WORLD["tasks"]["test"]]
    rewards: dict[str, dict[str, float]] = {}
    for contrast in config["contrasts"].values():
        for role in ("control", "treatment"):
            name = contrast[role]
            if name not in rewards:
                run = config["runs"][name]
                prompt = PROMPT.message(run_skills(run))
                rewards[name] = simulate(run["checkpoint"], dict.fromkeys(task_ids, prompt), seed)
    covered = {}
    for name, contrast in config["contrasts"].items():
        pairs = align(rewards[contrast["control"]], rewards[contrast["treatment"]], ("c", "t"))
        for method in ("percentile", "BCa"):
            result = paired_bootstrap(
                pairs, rng=np.random.default_rng(seed), n_resamples=N_RESAMPLES, method=method
            )
            covered[(name, method)] = result.ci_low <= WORLD["truths"][name] <= result.ci_high
        covered[(name, "estimate")] = result.estimate
        covered[(name, "standard_error")] = result.standard_error
    return covered


def gate_setup() -> dict[str, Any]:
    ranking = WORLD["config"]["ranking"]
    chunks = WORLD["banks"][ranking["bank"]]
    task_ids = [t.task_id for t in WORLD["tasks"]["val"]]
    runs = [f"masked-{i + 1:02d}" for i in range(ranking["masked_runs"])]
    design = build_design(
        [s.chunk_id for s in chunks],
        task_ids,
        runs,
        ranking["inclusion_probability"],
        ranking["design_seed"],
    )
    checkpoint = WORLD["config"]["runs"][ranking["bare_val_run"]]["checkpoint"]
    masks, expected = [], []
    bare = exact_rewards(checkpoint, [], "val")
    for run in runs:
        for i, task in enumerate(task_ids):
            bits = design.runs[run][task]
            chosen = [s for s, bit in zip(chunks, bits, strict=True) if bit]
            masks.append(bits)
            expected.append(float(exact_rewards(checkpoint, chosen, "val", i)[0]) - bare[i])
    masks_array = np.asarray(masks, dtype=np.float64)
    truth = np.linalg.lstsq(masks_array, np.asarray(expected), rcond=None)[0]
    with_intercept = np.column_stack([np.ones(len(masks_array)), masks_array])
    own = np.linalg.lstsq(with_intercept, np.asarray(expected), rcond=None)[0]
    return {
        "own_effects": own[1:],
        "common_effect": float(own[0]),
        "loading": common_effect_loading(masks_array),
        "design": design,
        "runs": runs,
        "chunks": chunks,
        "checkpoint": checkpoint,
        "masks": masks_array,
        "truth": truth,
        "tasks": task_ids,
    }


def gate_replicate(replicate: int) -> dict[tuple[str, str], bool]:
    gate, seed = WORLD["gate"], 2_000_000 + replicate
    tasks, chunks = gate["tasks"], gate["chunks"]
    bare = simulate(gate["checkpoint"], dict.fromkeys(tasks, PROMPT.message([])), seed)
    deltas, groups = [], []
    for run in gate["runs"]:
        masks = gate["design"].runs[run]
        prompts = {
            t: PROMPT.message([s for s, bit in zip(chunks, masks[t], strict=True) if bit])
            for t in tasks
        }
        rewards = simulate(gate["checkpoint"], prompts, seed)
        deltas += [rewards[t] - bare[t] for t in tasks]
        groups += tasks
    ids = tuple(s.chunk_id for s in chunks)
    fit = fit_gate(gate["masks"], np.asarray(deltas), ids, groups)
    sensitivity = fit_gate(gate["masks"], np.asarray(deltas), ids, groups, intercept=True)
    covered: dict[tuple[str, str], Any] = {}
    n, k = gate["masks"].shape
    df = fit.degrees_of_freedom
    for method, beta, se in (
        ("memo vs own", fit.beta, fit.standard_error),
        ("intercept vs own", sensitivity.chunk_beta, sensitivity.standard_error[1:]),
    ):
        inside = np.abs(beta - gate["own_effects"]) <= scipy.stats.t.ppf(0.975, df) * se
        for chunk, hit in zip(ids, inside, strict=True):
            covered[(f"beta {chunk}", method)] = bool(hit)
    half = scipy.stats.t.ppf(0.975, df) * sensitivity.standard_error[0]
    common_hit = abs(sensitivity.beta[0] - gate["common_effect"]) <= half
    covered[("common effect", "intercept vs own")] = bool(common_hit)
    covered[("memo offset", "estimate")] = float(np.mean(fit.beta - gate["own_effects"]))
    for method, se, df in (
        ("naive OLS", fit.naive_standard_error, n - k),
        ("task-clustered", fit.standard_error, fit.degrees_of_freedom),
    ):
        half = scipy.stats.t.ppf(0.975, df) * se
        inside = np.abs(fit.beta - gate["truth"]) <= half
        for chunk, hit in zip(fit.chunk_ids, inside, strict=True):
            covered[(f"beta {chunk}", method)] = bool(hit)
    return covered


def coverage(
    results: list[dict[tuple[str, str], Any]],
) -> dict[tuple[str, str], tuple[float, float]]:
    """(coverage, Monte Carlo error) per (quantity, interval method)."""
    table: dict[tuple[str, str], tuple[float, float]] = {}
    for key in results[0] if results else {}:
        if key[1] in ("estimate", "standard_error"):
            continue
        hits = np.array([r[key] for r in results], dtype=float)
        rate = float(hits.mean())
        table[key] = (rate, float(np.sqrt(max(rate * (1 - rate), 1e-12) / len(hits))))
    return table


def figure(table: dict[tuple[str, str], tuple[float, float]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = sorted({m for _, m in table})
    rows = sorted({q for q, _ in table}, key=lambda q: (q.startswith("beta"), q))
    fig, ax = plt.subplots(figsize=(7.0, 0.22 * len(rows) + 1.4))
    ax.axvspan(0.93, 0.97, color="0.9", label="0.93-0.97")
    ax.axvline(0.95, color="0.4", lw=0.8)
    for j, method in enumerate(methods):
        ys = [
            i + (j - (len(methods) - 1) / 2) * 0.2
            for i, q in enumerate(rows)
            if (q, method) in table
        ]
        xs = [table[(q, method)] for q in rows if (q, method) in table]
        ax.errorbar(
            [x for x, _ in xs], ys, xerr=[1.96 * e for _, e in xs], fmt="o", ms=3, label=method
        )
    ax.set_yticks(range(len(rows)), rows, fontsize=7)
    ax.set_xlabel("coverage of the nominal 95% interval (bars: 95% Monte Carlo interval)")
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out.with_suffix(".pdf"))
    fig.savefig(out.with_suffix(".png"), dpi=150)


def main(contrast_reps: int, gate_reps: int) -> None:
    start = time.perf_counter()
    WORLD.update(build_world())
    WORLD["truths"] = contrast_truths()
    WORLD["gate"] = gate_setup()
    print(f"world and truths ready in {time.perf_counter() - start:.0f} s")
    with multiprocessing.get_context("fork").Pool(os.cpu_count()) as pool:
        contrasts = pool.map(contrast_replicate, range(contrast_reps), chunksize=8)
        print(f"{contrast_reps} contrast replicates done at {time.perf_counter() - start:.0f} s")
        gates = pool.map(gate_replicate, range(gate_reps), chunksize=4)
    table = {**coverage(contrasts), **coverage(gates)}
    header = f"{'contrast':22} {'truth':>8} {'mean est.':>10} {'bias/MC se':>11}"
    print(f"\n{header} {'sd est.':>8} {'mean boot se':>12}")
    for name, truth in WORLD["truths"].items():
        estimates = np.array([r[(name, "estimate")] for r in contrasts])
        boot = np.mean([r[(name, "standard_error")] for r in contrasts])
        z = (estimates.mean() - truth) / (estimates.std(ddof=1) / np.sqrt(len(estimates)))
        print(
            f"{name:22} {truth:+8.4f} {estimates.mean():+10.4f} {z:+11.1f} "
            f"{estimates.std(ddof=1):8.4f} {boot:12.4f}"
        )
    print(f"{gate_reps} gate replicates done at {time.perf_counter() - start:.0f} s\n")
    gate = WORLD["gate"]
    if gates:
        offset = np.mean([r[("memo offset", "estimate")] for r in gates])
        print(
            f"common effect of a skills section (SECTION_SHIFT="
            f"{os.environ.get('SECTION_SHIFT', '0')}): {gate['common_effect']:+.4f} on reward; "
            f"memo betas' mean offset from the chunks' own effects {offset:+.4f}, "
            f"predicted by the design {gate['common_effect'] * gate['loading'].mean():+.4f} "
            f"(mean loading {gate['loading'].mean():.4f} = 1/{1 / gate['loading'].mean():.2f})"
        )
    print(f"{'quantity':26} {'method':16} coverage +/- MC error")
    for (quantity, method), (rate, error) in sorted(table.items()):
        print(f"{quantity:26} {method:16} {rate:.3f} +/- {error:.3f}")
    for method in sorted({m for _, m in table}):
        rates = [r for (q, m), (r, _) in table.items() if m == method]
        print(f"mean over quantities, {method}: {np.mean(rates):.3f}")
    print("truths:", {k: round(v, 4) for k, v in WORLD["truths"].items()})
    figures = (
        Path(tempfile.mkdtemp(prefix="coverage-figure-")) if TINY else REPO / "paper" / "figures"
    )
    figure(table, figures / "coverage_study")
    print(f"figure: {figures / 'coverage_study'}.pdf")


if __name__ == "__main__":
    main(
        int(sys.argv[1]) if len(sys.argv) > 1 else (2 if TINY else 1000),
        int(sys.argv[2]) if len(sys.argv) > 2 else (2 if TINY else 500),
    )
