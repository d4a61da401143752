"""Parameter audit and invalid-run rules of one ablation run (memo 003 §0, §4, §5).

Every check is named with pass/fail and a detail. A run is invalid if any check fails;
invalid runs stay in the tables, marked, with the reasons.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skilleval.ablation.contract import TrainerContract
from skilleval.ablation.plan import PlannedRun, benchmark_defaults
from skilleval.ablation.trainer import batch_sizes, launch_files
from skilleval.ablation.trainer_files import (
    TrainerOutputError,
    config_int,
    parse_count,
    parse_sizes,
    parse_start,
    read_mapping,
)
from skilleval.config.matrix import Matrix
from skilleval.records.ablation import AblationAudit, AblationSummary
from skilleval.storage.records import Check, failed


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted keys from a nested config (what an OmegaConf/Hydra trainer writes); keys
    that are dotted already stay as they are."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def read_log(out_root: Path, contract: TrainerContract) -> tuple[str, Path | None]:
    """The trainer's log (the contract's first log file that exists), else its output the
    workflow captured beside the out_root; empty when there is neither."""
    return first_log(printed_texts(out_root, contract))


def first_log(printed: list[tuple[str, Path]]) -> tuple[str, Path | None]:
    return printed[0] if printed else ("", None)


def printed_texts(out_root: Path, contract: TrainerContract) -> list[tuple[str, Path]]:
    """Everything the trainer printed that exists: each declared log file and the stdout
    and stderr the workflow captured, which a crash reaches whatever the logs say."""
    paths = [*(out_root / name for name in contract.log_files), launch_files(out_root)[1]]
    return [(path.read_text(errors="replace"), path) for path in paths if path.is_file()]


def found_in(pattern: str, texts: list[tuple[str, Path]]) -> list[str]:
    """Each match of ``pattern`` in ``texts``, with the file it is in."""
    return [f"{match!r} in {path}" for text, path in texts for match in re.findall(pattern, text)]


# A trainer's clock and the workflow's may differ by this much on one host or cluster.
CLOCK_SKEW = dt.timedelta(minutes=5)


@dataclass(frozen=True)
class RunFiles:
    """What one finished ablation run left in its out_root, and where each part came from."""

    summary: dict[str, Any]
    config: dict[str, Any]
    config_path: Path
    log: str
    log_path: Path | None

    contract: TrainerContract
    printed: list[tuple[str, Path]]

    @classmethod
    def read(cls, summary_path: str, contract: TrainerContract) -> RunFiles:
        """The trainer's own config and log (trainer.contract): its log in the out_root,
        else its captured output beside the out_root (trainer.launch_files)."""
        out_root = Path(summary_path).parent
        config_path = out_root / contract.config_file
        if not config_path.exists():
            raise TrainerOutputError(
                f"{config_path} does not exist: the trainer wrote no {contract.config_file} "
                "(trainer.contract.config_file), so the run cannot be audited"
            )
        printed = printed_texts(out_root, contract)  # each file read once
        return cls(
            AblationSummary.read(summary_path).as_json(),
            contract.audit_keys(flatten(read_mapping(config_path))),
            config_path,
            *first_log(printed),
            contract,
            printed,
        )

    @property
    def log_head(self) -> str:
        return "\n".join(self.log.splitlines()[: self.contract.log_head_lines])

    def from_log(self, line: str) -> tuple[str, str] | None:
        """(value, where) of the first match of the contract's ``line`` in the log head."""
        pattern = self.contract.pattern(line)
        for number, text in enumerate(self.log_head.splitlines(), start=1):
            match = pattern.search(text)
            if match:
                value = next(g for g in match.groups() if g is not None)
                return value, f"{self.log_path} line {number}"
        return None

    def started(self) -> tuple[dt.datetime, str]:
        """When the trainer started, from its own output: the log head's start line, else
        the time it wrote config.json."""
        found = self.from_log("start")
        if found:
            return parse_start(found[0], found[1]), found[1]
        mtime = dt.datetime.fromtimestamp(self.config_path.stat().st_mtime, dt.UTC)
        return mtime, f"the modification time of {self.config_path}"


def parameter_checks(run: PlannedRun, matrix: Matrix, files: RunFiles) -> list[Check]:
    """Post-launch audit: the run's config differs from the default only where declared."""
    config = files.config
    default = benchmark_defaults(matrix, run.benchmark)
    allowed = set(run.overrides) | {OUT_ROOT_KEY}
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
    gate = {key: config.get(key) for key in GATE_KEYS}
    checks.append(
        Check(
            "gate_and_test_on",
            all(value is True for value in gate.values()),
            ", ".join(f"{key.split('.')[-1]}={value}" for key, value in gate.items()),
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
GATE_KEYS = ("evaluation.use_gate", "evaluation.eval_test")
OUT_ROOT_KEY = "env.out_root"
# The trainer config keys each check of the config reads (skilleval trainer check).
CONFIG_CHECK_KEYS: dict[str, tuple[str, ...]] = {
    "only_declared_keys_differ": (),
    **{name: (key,) for name, key in AUDITED_KEYS},
    "gate_and_test_on": GATE_KEYS,
    "unique_out_root": (OUT_ROOT_KEY,),
}


def batch_check(run: PlannedRun, matrix: Matrix, files: RunFiles, default: dict[str, Any]) -> Check:
    """The batches the trainer reports in its log head, against ceil(train / batch) and
    the seed's verified table; refused when the log does not say them."""
    config = files.config
    train_found, batches_found = files.from_log("train_size"), files.from_log("batch_sizes")
    if train_found is None or batches_found is None:
        missing = [
            n for n, f in (("train size", train_found), ("batch sizes", batches_found)) if f is None
        ]
        return Check(
            "batch_logic",
            False,
            f"the trainer's log head ({files.log_path or 'no log'}) does not say its "
            f"{' or '.join(missing)}",
        )
    try:
        train = parse_count(train_found[0], "train size", train_found[1])
        reported = parse_sizes(batches_found[0], batches_found[1])
        batch = config_int(config, "train.batch_size", files.config_path)
        accumulation = config_int(config, "train.accumulation", files.config_path)
    except TrainerOutputError as unreadable:
        return Check("batch_logic", False, str(unreadable))
    want = batch_sizes(train, batch, accumulation)
    verified = matrix.benchmarks[run.benchmark].verified_batches
    same_split = config.get("env.split_dir") == default["env.split_dir"]
    table = verified.get(batch) if same_split else None
    return Check(
        "batch_logic",
        reported == want and (table is None or table == want),
        f"steps_per_epoch = ceil({train} / ({config['train.batch_size']} x "
        f"{config['train.accumulation']})) = {len(want)}, sizes {want}; trainer reported "
        f"{reported} (train size from {train_found[1]}, batches from {batches_found[1]})"
        + (f"; seed table {table}" if table else ""),
    )


def invalid_run_checks(run: PlannedRun, matrix: Matrix, files: RunFiles) -> list[Check]:
    """The memo's invalid-run rules: token cap, real 429s, crashes, writers, early starts."""
    rules, summary, config = matrix.invalid_rules, files.summary, files.config
    reported = summary.get("empty_response_fraction")
    empty = float(reported) if reported is not None else None
    rate = found_in(rules.rate_limit_pattern, files.printed)
    crash = found_in(rules.crash_pattern, files.printed)
    searched = ", ".join(str(path) for _, path in files.printed) or "no output"
    writers: dict[str, Any] = summary.get("provenance", {}).get("writers") or {}
    root = config.get(OUT_ROOT_KEY)
    # The run's own folder: where its config is (the workflow's launch puts it at
    # run.out_root; trainer check reads a launch wherever it wrote).
    # The pass detail names it as given (relative in the workflow), so that an audit does
    # not depend on the directory the graph was built in.
    own = files.config_path.parent
    same_root = root is not None and Path(str(root)).resolve() == own.resolve()
    return [
        Check(
            "unique_out_root",
            same_root,
            f"{OUT_ROOT_KEY} is the run's own ({own})"
            if same_root
            else f"{OUT_ROOT_KEY} {root}, not the run's {own.resolve()}",
        ),
        Check(
            "empty_responses",
            empty is not None and empty <= rules.max_empty_response_fraction,
            "the trainer did not report its empty_response_fraction, so the token cap's "
            "effect cannot be checked"
            if empty is None
            else f"{empty:.1%} empty responses (cap {config.get('model.max_tokens')} tokens; "
            f"limit {rules.max_empty_response_fraction:.0%})",
        ),
        Check(
            "no_rate_limit_errors",
            not rate,
            f"real rate-limit error text: {'; '.join(rate[:2])}"
            if rate
            else f"no 429 error text in {searched} (progress counters such as 429/494 are not "
            "errors)",
        ),
        Check(
            "no_crash",
            not crash,
            f"found {'; '.join(crash[:3])}" if crash else f"no Traceback/OOM/Killed in {searched}",
        ),
        Check(
            "single_writer",
            summary.get("single_writer") is True,
            "no other live process named the out_root when the job started"
            if summary.get("single_writer") is True
            else str(writers.get("single_writer_detail") or "no record of other writers"),
        ),
        started_check(run, matrix, files),
    ]


def started_check(run: PlannedRun, matrix: Matrix, files: RunFiles) -> Check:
    """Whether the run started after every fix of its benchmark, and not before the
    workflow launched it (a start from before the launch is an earlier run's output); an
    unreadable start fails."""
    try:
        started, source = files.started()
    except TrainerOutputError as unreadable:
        return Check("started_after_fixes", False, f"unknown start: {unreadable}")
    late = [
        fix.name
        for fix in matrix.invalid_rules.fixes
        if run.benchmark in fix.benchmarks and started < dt.datetime.fromisoformat(fix.fixed_at)
    ]
    launched = files.summary.get("provenance", {}).get("started_at")
    early = launched is not None and started < dt.datetime.fromisoformat(launched) - CLOCK_SKEW
    wrong = [f"before fix(es) {late}"] if late else []
    if early:
        wrong.append(f"before the workflow launched it at {launched}: an earlier run's output")
    return Check(
        "started_after_fixes",
        not wrong,
        f"started {started.isoformat()} (from {source}) " + " and ".join(wrong)
        if wrong
        else f"started after all fixes{' and after its launch' if launched else ''} (start "
        f"from {source})",
    )


def audit_run(run: PlannedRun, matrix: Matrix, summary_path: str) -> dict[str, Any]:
    """The run's audit; a trainer's file the audit cannot read makes the run invalid with
    that reason (file and position), never a traceback."""
    try:
        files = RunFiles.read(summary_path, TrainerContract.of(matrix))
    except TrainerOutputError as unreadable:
        check = Check("trainer_output_readable", False, str(unreadable))
        return {
            "run_id": run.run_id,
            "valid": False,
            "reasons": [f"{check.name}: {check.detail}"],
            "checks": [check.as_json()],
        }
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


def write_audit(run: PlannedRun, matrix: Matrix, summary_path: str, output: str) -> None:
    AblationAudit.create(**audit_run(run, matrix, summary_path)).write(output)
