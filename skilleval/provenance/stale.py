"""What is stale, and which paper numbers it touches, in words.

Compares what each built result recorded (protocol values, checkpoint fingerprint,
chunk hashes, split hash; the ablation plan fingerprint) with what config and input
files say now, and maps every stale or missing result to the table cells it feeds:
"Table main, final-ST: protocol sampling.temperature 0.6 -> 0.7". Works from files
alone, without building Snakemake's DAG, so it answers in well under a second.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from skilleval import paths
from skilleval.ablation.plan import load_matrix, plan
from skilleval.ablation.status import run_status
from skilleval.checkpoints.files import checkpoint_fingerprint
from skilleval.config.plan import WorkflowPlan
from skilleval.skills.bank import bank_hash, load_bank
from skilleval.storage.hashing import file_sha256


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def run_changes(summary: dict[str, Any], inputs: Any, root: Path) -> list[str]:
    """Why a built run no longer matches its inputs, one phrase per difference."""
    reasons = []
    old = flatten(summary.get("protocol_values", {}))
    new = flatten({k: v for k, v in inputs.protocol.items() if k != "description"})
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            reasons.append(f"protocol {key} {old.get(key)!r} -> {new.get(key)!r}")
    weights = root / inputs.checkpoint_path
    if not weights.exists():
        reasons.append(f"checkpoint {inputs.checkpoint_id} weights missing ({weights})")
    elif checkpoint_fingerprint(weights) != summary.get("checkpoint_fingerprint"):
        reasons.append(f"checkpoint {inputs.checkpoint_id} weights changed")
    if inputs.bank_path:
        bank = root / inputs.bank_path
        if not bank.exists():
            reasons.append(f"bank {inputs.bank_name} missing")
        else:
            now = {s.chunk_id: bank_hash([s])[:16] for s in load_bank(bank)}
            before = summary.get("chunk_hashes", {})
            for chunk in sorted(set(now) | set(before)):
                if now.get(chunk) != before.get(chunk):
                    state = (
                        "added"
                        if chunk not in before
                        else "removed"
                        if chunk not in now
                        else "changed"
                    )
                    reasons.append(f"bank {inputs.bank_name} chunk {chunk} {state}")
    split = root / inputs.split_file
    if split.exists() and file_sha256(split) != summary.get("split_hash"):
        reasons.append("task split file changed")
    return reasons


def cells_of_run(plan: WorkflowPlan, run: str) -> list[str]:
    cells = []
    if run in plan.main_runs:
        cells.append(f"Table main, {run}")
    for name, spec in plan.contrasts.items():
        if run in (spec.control, spec.treatment) and spec.table != "extra":
            cells.append(f"Table {spec.table}, {name}")
    if run in {arm.run for arm in plan.paper_arms}:
        cells.append(f"Table ranking, {run}")
    if run == plan.ranking["bare_val_run"]:
        cells.append("Table ranking, every arm (gate betas)")
    return cells


def stale_items(config: dict[str, Any], root: Path) -> Iterator[dict[str, Any]]:
    plan = WorkflowPlan(config)
    gate_cells = ["Table ranking, every arm (gate betas)"]
    runs = [(run, paths.fill(paths.RUN_SUMMARY, run=name)) for name, run in plan.runs.items()]
    runs += [
        (run, paths.fill(paths.GATE_RUN_SUMMARY, gate=plan.gate, masked=masked))
        for masked, run in plan.masked.items()
        if masked in plan.designs["design"].runs
    ]
    for run, summary_file in runs:
        summary_path = root / summary_file
        if not summary_path.exists():
            reasons = ["not built yet"]
        else:
            summary = json.loads(summary_path.read_text())
            reasons = run_changes(summary, plan.run_inputs(run), root)
        cells = gate_cells if run.mask else cells_of_run(plan, run.name)
        if reasons and (cells or summary_path.exists()):  # unbuilt optional runs feed nothing
            yield {"result": summary_file, "reasons": reasons, "cells": cells}
    yield from stale_ablation(config, root)


def stale_ablation(config: dict[str, Any], root: Path) -> Iterator[dict[str, Any]]:
    matrix = load_matrix(root / config["ablation"]["matrix"])
    for run in plan(matrix):
        status = run_status(run, matrix, root)
        if status in ("stale", "pending"):
            table = "harness" if run.harness else f"ablation_{run.benchmark}"
            yield {
                "result": run.summary_path,
                "reasons": ["ablation plan changed" if status == "stale" else "not built yet"],
                "cells": [f"Table {table}, {run.group}={run.value} ({run.run_id})"],
            }


def report(items: list[dict[str, Any]]) -> str:
    if not items:
        return "Nothing is stale: every paper number is built from the current inputs."
    lines = []
    for item in items:
        for cell in item["cells"] or ["(no paper cell)"]:
            lines.append(f"{cell}: {'; '.join(item['reasons'])}")
    return "\n".join(sorted(set(lines))) + f"\n{len(items)} stale or missing result(s)."
