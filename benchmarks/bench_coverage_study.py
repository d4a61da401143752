"""Coverage study: are the paper's 95% intervals 95% intervals, on worlds the project was
never tuned on?

For each world (a world seed and, optionally, a common effect of a skills section) the
ground truth is fixed: for every task the exact expected reward of each checkpoint x bank
(and of each Gate A mask), from the world's outcome table. Each replicate re-simulates the
runs with a fresh runtime seed, exactly as the workflow runs them (same policy, same salt,
arms of one replicate sharing their runtime seed), and asks whether each interval covers
the truth:

* the five main contrasts, truth = mean over the test tasks of the exact expected paired
  difference; the four intervals of analysis/bootstrap.py on the same replicate: percentile,
  BCa, bootstrap-t (studentized) and the paired t interval;
* the 16 Gate A betas of the memo's model (no intercept), truth = the least-squares
  coefficients of the exact expected deltas on the fixed mask design (what that model
  estimates); t intervals from naive OLS and from task-clustered (CR1) standard errors;
* the same betas against each chunk's own effect (the coefficients of the same least
  squares with an intercept), for the memo's fit and for the fit with an intercept, and
  that fit's intercept against the common effect of a skills section.

Prints, per world, the coverage table (quantity x method -> coverage +/- Monte Carlo error)
and what may explain a shortfall (bias, the spread of the estimates against the bootstrap's
standard error, the skew and discreteness of the per-task differences); then, across the
worlds, each contrast method's per-world coverage, worst world and mean, the Gate A
methods' likewise, and the interval method chosen by the rule of docs/statistics.md: the
one whose worst per-contrast coverage across the worlds is closest to 0.95 without falling
below it by more than its Monte Carlo error. --json keeps every figure. Asserts nothing.

Replicates run in parallel (one process per core). Usage:
  python benchmarks/bench_coverage_study.py [contrast_reps] [gate_reps]
      [--worlds SEED[:SHIFT],...] [--json PATH]
SHIFT is a world's skills-section shift in logits (world.skills_section_shift). The
default worlds are seeds no default config or test uses, one with a common effect.
SKILLEVAL_BENCH_SIZE=tiny runs two replicates of each on two small worlds.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
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
from skilleval.config.model import INTERVAL_METHODS
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
# Seeds that no shipped config, test or earlier study used; the last has a common effect of
# a skills section (a logit shift on every prompt with skills).
WORLDS = "7301:0,7306:0.3" if TINY else "7301:0,7302:0,7303:0,7304:0,7305:0,7306:0.3"
GATE_METHODS = ("naive OLS", "task-clustered")
WORLD: dict[str, Any] = {}


def build_world(seed: int, shift: float) -> dict[str, Any]:
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["world"]["seed"] = seed
    config["world"]["skills_section_shift"] = shift
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
    covered: dict[tuple[str, str], Any] = {}
    for name, contrast in config["contrasts"].items():
        pairs = align(rewards[contrast["control"]], rewards[contrast["treatment"]], ("c", "t"))
        for method in INTERVAL_METHODS:
            rng = np.random.default_rng(seed)
            result = paired_bootstrap(pairs, rng=rng, n_resamples=N_RESAMPLES, method=method)
            covered[(name, method)] = result.ci_low <= WORLD["truths"][name] <= result.ci_high
            if method == "percentile":
                covered[(name, "standard_error")] = result.standard_error
        deltas = pairs.deltas
        covered[(name, "estimate")] = float(deltas.mean())
        covered[(name, "skew")] = float(scipy.stats.skew(deltas)) if deltas.std() else 0.0
        covered[(name, "distinct")] = len(np.unique(deltas))
        covered[(name, "zero share")] = float(np.mean(deltas == 0))
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
        if not isinstance(results[0][key], bool):
            continue
        hits = np.array([r[key] for r in results], dtype=float)
        rate = float(hits.mean())
        table[key] = (rate, float(np.sqrt(max(rate * (1 - rate), 1e-12) / len(hits))))
    return table


def run_world(seed: int, shift: float, contrast_reps: int, gate_reps: int) -> dict[str, Any]:
    """One world's replicates, its coverage table and the diagnostics of its contrasts."""
    start = time.perf_counter()
    WORLD.clear()
    WORLD.update(build_world(seed, shift))
    WORLD["truths"] = contrast_truths()
    WORLD["gate"] = gate_setup()
    with multiprocessing.get_context("fork").Pool(os.cpu_count()) as pool:
        contrasts = pool.map(contrast_replicate, range(contrast_reps), chunksize=8)
        gates = pool.map(gate_replicate, range(gate_reps), chunksize=4)
    table = {**coverage(contrasts), **coverage(gates)}
    diagnostics = {}
    for name, truth in WORLD["truths"].items():
        estimates = np.array([r[(name, "estimate")] for r in contrasts])
        spread = float(estimates.std(ddof=1))
        diagnostics[name] = {
            "truth": truth,
            "bias / MC se": (estimates.mean() - truth) / (spread / np.sqrt(len(estimates))),
            "sd of estimates": spread,
            "mean bootstrap se": float(np.mean([r[(name, "standard_error")] for r in contrasts])),
            "mean skew of deltas": float(np.mean([r[(name, "skew")] for r in contrasts])),
            "mean distinct deltas": float(np.mean([r[(name, "distinct")] for r in contrasts])),
            "zero deltas": float(np.mean([r[(name, "zero share")] for r in contrasts])),
        }
    gate = WORLD["gate"]
    offset = np.mean([r[("memo offset", "estimate")] for r in gates]) if gates else 0.0
    print(
        f"\nworld seed {seed}, skills-section shift {shift}: {contrast_reps} contrast and "
        f"{gate_reps} Gate A replicates in {time.perf_counter() - start:.0f} s; common effect "
        f"{gate['common_effect']:+.4f} on reward, memo betas' mean offset from the chunks' own "
        f"effects {offset:+.4f} (the design predicts "
        f"{gate['common_effect'] * gate['loading'].mean():+.4f})"
    )
    print(
        f"{'contrast':20} {'truth':>8} {'bias/MCse':>9} {'sd est.':>8} {'boot se':>8} "
        f"{'skew':>6} {'distinct':>8} {'zeros':>6}  "
        + "  ".join(f"{m:>11}" for m in INTERVAL_METHODS)
    )
    for name, d in diagnostics.items():
        cells = "  ".join(
            f"{table[(name, m)][0]:.3f}±{table[(name, m)][1]:.3f}" for m in INTERVAL_METHODS
        )
        print(
            f"{name:20} {d['truth']:+8.4f} {d['bias / MC se']:+9.1f} {d['sd of estimates']:8.4f} "
            f"{d['mean bootstrap se']:8.4f} {d['mean skew of deltas']:+6.2f} "
            f"{d['mean distinct deltas']:8.1f} {d['zero deltas']:6.2f}  {cells}"
        )
    for method in GATE_METHODS:
        rates = [r for (q, m), (r, _) in table.items() if m == method]
        if rates:
            print(f"Gate A betas, {method}: mean {np.mean(rates):.3f}, lowest {min(rates):.3f}")
    return {
        "seed": seed,
        "shift": shift,
        "contrast_replicates": contrast_reps,
        "gate_replicates": gate_reps,
        "coverage": [[q, m, rate, error] for (q, m), (rate, error) in sorted(table.items())],
        "diagnostics": diagnostics,
    }


def across_worlds(worlds: list[dict[str, Any]]) -> dict[str, Any]:
    """Each method's coverage per world, worst world and mean: the contrasts' methods per
    contrast (worst over contrasts too), the Gate A methods over the 16 betas."""
    cells = {(w["seed"], q, m): (r, e) for w in worlds for q, m, r, e in w["coverage"]}
    contrasts = list(worlds[0]["diagnostics"]) if worlds else []
    summary: dict[str, Any] = {"contrasts": {}, "gate": {}}
    print(f"\nacross {len(worlds)} worlds (seed:shift): coverage of each 95% interval")
    labels = [f"{w['seed']}:{w['shift']:g}" for w in worlds]
    print(
        f"{'contrast':20} {'method':12} " + " ".join(f"{x:>11}" for x in labels) + "  worst   mean"
    )
    for method in INTERVAL_METHODS:
        worst: tuple[float, float, str, str] = (2.0, 0.0, "", "")
        for name in contrasts:
            row = [cells[(w["seed"], name, method)] for w in worlds]
            lowest = min(range(len(row)), key=lambda i: row[i][0])
            if row[lowest][0] < worst[0]:
                worst = (row[lowest][0], row[lowest][1], name, labels[lowest])
            print(
                f"{name:20} {method:12} "
                + " ".join(f"{r:.3f}±{e:.3f}" for r, e in row)
                + f"  {row[lowest][0]:.3f}  {np.mean([r for r, _ in row]):.3f}"
            )
        rates = [cells[(w["seed"], q, method)][0] for w in worlds for q in contrasts]
        summary["contrasts"][method] = {
            "worst": worst[0], "worst_mc_error": worst[1], "worst_contrast": worst[2],
            "worst_world": worst[3], "mean": float(np.mean(rates)),
        }  # fmt: skip
    for gate_method in GATE_METHODS:
        per_world = []
        for w in worlds:
            rates = [r for (s, _, m), (r, _) in cells.items() if (s, m) == (w["seed"], gate_method)]
            per_world.append((float(np.mean(rates)), min(rates)) if rates else (float("nan"),) * 2)
        summary["gate"][gate_method] = {"per_world_mean_and_lowest": per_world}
        print(
            f"Gate A betas, {gate_method}: mean per world "
            + ", ".join(
                f"{label} {m:.3f} (lowest {low:.3f})"
                for label, (m, low) in zip(labels, per_world, strict=True)
            )
        )
    return summary


def chosen_method(summary: dict[str, Any]) -> str | None:
    """The interval method whose worst per-contrast coverage across the worlds is closest
    to 0.95 without falling below it by more than its Monte Carlo error."""
    holding = {
        method: abs(s["worst"] - 0.95)
        for method, s in summary["contrasts"].items()
        if s["worst"] >= 0.95 - s["worst_mc_error"]
    }
    return min(holding, key=lambda m: holding[m]) if holding else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("contrast_reps", nargs="?", type=int, default=2 if TINY else 1000)
    parser.add_argument("gate_reps", nargs="?", type=int, default=2 if TINY else 300)
    parser.add_argument("--worlds", default=WORLDS, help="SEED[:SHIFT],... (default %(default)s)")
    parser.add_argument("--json", type=Path, help="write every figure here")
    args = parser.parse_args()
    worlds = []
    for item in args.worlds.split(","):
        seed, _, shift = item.partition(":")
        worlds.append(run_world(int(seed), float(shift or 0), args.contrast_reps, args.gate_reps))
    summary = across_worlds(worlds)
    for method, s in summary["contrasts"].items():
        print(
            f"mean over quantities and worlds, {method}: {s['mean']:.3f}; worst "
            f"{s['worst']:.3f} +/- {s['worst_mc_error']:.3f} ({s['worst_contrast']}, world "
            f"{s['worst_world']})"
        )
    chosen = chosen_method(summary)
    print(
        f"chosen interval method: {chosen}" if chosen else
        "chosen interval method: none; no method's worst coverage is within its Monte Carlo "
        "error of 0.95"
    )  # fmt: skip
    if args.json:
        args.json.write_text(
            json.dumps({"worlds": worlds, "summary": summary, "chosen": chosen}, indent=1)
        )
        print(f"figures: {args.json}")


if __name__ == "__main__":
    main()
