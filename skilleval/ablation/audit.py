"""Parameter audit and invalid-run rules of one ablation run (memo 003 §0, §4, §5).

Every check is named with pass/fail and a detail. A run is invalid if any check fails;
invalid runs stay in the tables, marked, with the reasons.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skilleval.ablation.plan import PlannedRun, benchmark_defaults
from skilleval.ablation.records import AblationAudit
from skilleval.ablation.trainer import batch_sizes
from skilleval.storage.records import Check, failed, read_record


@dataclass(frozen=True)
class RunFiles:
    """What one finished ablation run left in its out_root."""

    summary: dict[str, Any]
    config: dict[str, Any]
    log: str

    @classmethod
    def read(cls, summary_path: str) -> RunFiles:
        out_root = Path(summary_path).parent
        log = out_root / "train.log"
        return cls(
            read_record(summary_path, "ablation_summary"),
            json.loads((out_root / "config.json").read_text()),
            log.read_text() if log.exists() else "",
        )


def parameter_checks(run: PlannedRun, matrix: dict[str, Any], files: RunFiles) -> list[Check]:
    """Post-launch audit: the run's config differs from the default only where declared."""
    config = files.config
    default = benchmark_defaults(matrix, run.benchmark)
    allowed = set(run.overrides) | {"env.out_root"}
    differing = sorted(k for k in set(config) | set(default) if config.get(k) != default.get(k))
    undeclared = [k for k in differing if k not in allowed]
    checks = [
        Check(
            "only_declared_keys_differ",
            not undeclared,
            f"undeclared differences: {[(k, default.get(k), config.get(k)) for k in undeclared]}"
            if undeclared
            else f"differs from default in {differing}",
        )
    ]
    expected = {**default, **run.overrides}
    for name, key in AUDITED_KEYS:
        checks.append(
            Check(
                name,
                config.get(key) == expected.get(key),
                f"{key} = {config.get(key)!r} (expected {expected.get(key)!r})",
            )
        )
    checks.append(
        Check(
            "gate_and_test_on",
            config.get("evaluation.use_gate") is True
            and config.get("evaluation.eval_test") is True,
            f"use_gate={config.get('evaluation.use_gate')}, "
            f"eval_test={config.get('evaluation.eval_test')}",
        )
    )
    return [*checks, batch_check(run, matrix, files, default)]


AUDITED_KEYS = (
    ("teacher_model", "model.teacher"),
    ("student_model", "model.student"),
    ("reasoning_effort", "model.reasoning_effort"),
    ("split_mode", "env.split_mode"),
    ("train_size_inferred", "train.train_size"),
    ("student_backend", "model.student_backend"),
)


def batch_check(
    run: PlannedRun, matrix: dict[str, Any], files: RunFiles, default: dict[str, Any]
) -> Check:
    summary, config = files.summary, files.config
    train = int(summary.get("train_size") or 0)
    want = batch_sizes(train, int(config["train.batch_size"]), int(config["train.accumulation"]))
    verified = matrix["benchmarks"][run.benchmark].get("verified_batches", {})
    table = (
        verified.get(int(config["train.batch_size"]))
        if config["env.split_dir"] == default["env.split_dir"]
        else None
    )
    return Check(
        "batch_logic",
        summary.get("batch_sizes") == want and (table is None or table == want),
        f"steps_per_epoch = ceil({train} / ({config['train.batch_size']} x "
        f"{config['train.accumulation']})) = {len(want)}, sizes {want}; trainer reported "
        f"{summary.get('batch_sizes')}" + (f"; seed table {table}" if table else ""),
    )


def invalid_run_checks(run: PlannedRun, matrix: dict[str, Any], files: RunFiles) -> list[Check]:
    """The memo's invalid-run rules: token cap, real 429s, crashes, writers, early starts."""
    rules, summary, config = matrix["invalid_rules"], files.summary, files.config
    empty = float(summary.get("empty_response_fraction") or 0.0)
    rate = re.findall(rules["rate_limit_pattern"], files.log)
    crash = re.findall(rules["crash_pattern"], files.log)
    started = dt.datetime.fromisoformat(summary["provenance"]["started_at"])
    recorded = summary.get("writers")
    writers: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
    late = [
        f["name"]
        for f in rules["fixes"]
        if run.benchmark in f["benchmarks"] and started < dt.datetime.fromisoformat(f["fixed_at"])
    ]
    return [
        Check(
            "unique_out_root",
            config.get("env.out_root") == run.out_root,
            f"out_root {config.get('env.out_root')}",
        ),
        Check(
            "empty_responses",
            empty <= rules["max_empty_response_fraction"],
            f"{empty:.1%} empty responses (cap {config.get('model.max_tokens')} tokens; "
            f"limit {rules['max_empty_response_fraction']:.0%})",
        ),
        Check(
            "no_rate_limit_errors",
            not rate,
            f"real rate-limit error text: {rate[:2]}"
            if rate
            else "no 429 error text (progress counters such as 429/494 are not errors)",
        ),
        Check("no_crash", not crash, f"found {crash[:3]}" if crash else "no Traceback/OOM/Killed"),
        Check(
            "single_writer",
            writers.get("single_writer") is True,
            str(writers.get("single_writer_detail") or "no record of other writers"),
        ),
        Check(
            "started_after_fixes",
            not late,
            f"started {started.isoformat()} before fix(es) {late}" if late else "after all fixes",
        ),
    ]


def audit_run(run: PlannedRun, matrix: dict[str, Any], summary_path: str) -> dict[str, Any]:
    files = RunFiles.read(summary_path)
    checks = parameter_checks(run, matrix, files)
    checks += invalid_run_checks(run, matrix, files)
    if run.harness:
        canonical = run.harness["skill_init"]
        checks.append(
            Check(
                "canonical_source_skill",
                files.config.get("env.skill_init") == canonical,
                f"skill_init {files.config.get('env.skill_init')!r}, canonical {canonical!r}",
            )
        )
    return {
        "run_id": run.run_id,
        "valid": not failed(checks),
        "reasons": [f"{c.name}: {c.detail}" for c in failed(checks)],
        "checks": [c.as_json() for c in checks],
    }


def write_audit(run: PlannedRun, matrix: dict[str, Any], summary_path: str, output: str) -> None:
    AblationAudit.create(**audit_run(run, matrix, summary_path)).write(output)
