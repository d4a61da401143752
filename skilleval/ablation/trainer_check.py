"""``skilleval trainer check OUT_ROOT``: which audit checks a trainer's output lets the
workflow compute, read through the trainer contract (ablation.contract), and then the
audit's own verdict on it.

Every check of the audit (ablation.audit) reads something the trainer wrote: the scores
in its results file, keys of its effective config, lines of its log head. A check whose
input is missing cannot be computed, and the audit would fail it; this command says so
for one finished out_root before a matrix of runs is paid for, naming the contract key
to point at the lab's own file or line. Then it applies the audit's checks, through the
audit's code, to the planned run the out_root stands for (``--run``, or the run whose
out_root it is), each passed or failed with its reason. It fails closed: exit 1 if any
check cannot be computed or fails, or when no planned run is named.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skilleval.ablation.audit import (
    CONFIG_CHECK_KEYS,
    RunFiles,
    audit_run,
    first_log,
    flatten,
    invalid_run_checks,
    parameter_checks,
    printed_texts,
    read_log,
)
from skilleval.ablation.contract import KEPT_RESULTS_FILE, SCORE_KEYS, TrainerContract
from skilleval.ablation.matrix import load_matrix
from skilleval.ablation.plan import PlannedRun, plan
from skilleval.ablation.trainer_files import (
    TrainerOutputError,
    config_int,
    parse_count,
    parse_sizes,
    parse_start,
    read_mapping,
)
from skilleval.config.matrix import Matrix
from skilleval.errors import SkillevalError
from skilleval.records.ablation import AblationSummary
from skilleval.storage.records import Check


@dataclass(frozen=True)
class Computable:
    """One audit check: whether the trainer's output lets it be computed, and from what."""

    check: str
    computable: bool
    detail: str

    def line(self) -> str:
        return f"  {'can   ' if self.computable else 'cannot'} {self.check}: {self.detail}"


def results_of(out_root: Path, contract: TrainerContract) -> tuple[dict[str, Any], str] | None:
    """The trainer's results and where they were: kept by a build, else as written."""
    for name in (KEPT_RESULTS_FILE, contract.results_file):
        path = out_root / name
        if path.is_file():
            return read_mapping(path), str(path)
    return None


def readable(read: Callable[[], Any]) -> tuple[Any, str | None]:
    """``read()``'s value, or None and why the audit could not read it."""
    try:
        return read(), None
    except TrainerOutputError as unreadable:
        return None, str(unreadable)


def trainer_check(out_root: Path, contract: TrainerContract) -> list[Computable]:
    """What each audit check would read in ``out_root``, found or missing, each value read
    by the audit's own parser (ablation.trainer_files)."""
    found: list[Computable] = []
    results, unreadable = readable(lambda: results_of(out_root, contract))
    if unreadable is not None:
        found += [Computable(c, False, unreadable) for c in ("scores", "empty_responses")]
    elif results is None:
        where = f"no {contract.results_file} in {out_root} (trainer.contract.results_file)"
        found += [Computable("scores", False, where), Computable("empty_responses", False, where)]
    else:
        data, path = results
        missing = [k for k in SCORE_KEYS if data.get(k) is None]
        scores = f"{path} lacks {missing}" if missing else f"{', '.join(SCORE_KEYS)} from {path}"
        found.append(Computable("scores", not missing, scores))
        empty = data.get("empty_response_fraction") is not None
        said = f"from {path}" if empty else f"{path} does not say empty_response_fraction"
        found.append(Computable("empty_responses", empty, said))
    config_path = out_root / contract.config_file
    config, unreadable = (
        readable(lambda: contract.audit_keys(flatten(read_mapping(config_path))))
        if config_path.is_file()
        else (None, f"no {config_path} (trainer.contract.config_file)")
    )
    for check, needed in CONFIG_CHECK_KEYS.items():
        if config is None:
            found.append(Computable(check, False, str(unreadable)))
            continue
        absent = [k for k in needed if k not in config]
        said = f"{config_path} has no {', '.join(absent)}" if absent else f"from {config_path}"
        found.append(Computable(check, not absent, said))
    return [*found, *log_checks(out_root, contract, config_path, config)]


def log_checks(
    out_root: Path, contract: TrainerContract, config_path: Path, config: dict[str, Any] | None
) -> list[Computable]:
    """The checks that read the trainer's log head (and the batch settings of its config),
    read as the audit reads them (ablation.audit.RunFiles)."""
    log, log_path = read_log(out_root, contract)
    if log_path is None:
        logs = ", ".join(contract.log_files)
        said = f"no log ({logs}; trainer.contract.log_files)"
        checks = ("batch_logic", "started_after_fixes", "no_rate_limit_errors", "no_crash")
        return [Computable(check, False, said) for check in checks]
    files = RunFiles({}, config or {}, config_path, log, log_path, contract, [])
    where = f"the log head ({log_path}, first {contract.log_head_lines} lines)"

    def no_line(name: str) -> str:
        return (
            f"{where} has no line matching trainer.contract.log_lines.{name} "
            f"({contract.log_lines[name]!r})"
        )

    lines = {name: files.from_log(name) for name in ("train_size", "batch_sizes")}
    gaps = [no_line(name) for name, found in lines.items() if found is None]
    train, batches_line = lines["train_size"], lines["batch_sizes"]
    parsers: list[Callable[[], Any]] = [
        functools.partial(config_int, config or {}, key, config_path)
        for key in ("train.batch_size", "train.accumulation")
    ]
    if train is not None:
        parsers.append(lambda: parse_count(train[0], "train size", train[1]))
    if batches_line is not None:
        parsers.append(lambda: parse_sizes(batches_line[0], batches_line[1]))
    gaps += [why for _, why in map(readable, parsers) if why is not None]
    batches = ", ".join(f"{n.replace('_', ' ')} from {f[1]}" for n, f in lines.items() if f)
    found = [Computable("batch_logic", not gaps, "; ".join(gaps) or batches)]
    start = files.from_log("start")
    if start is not None:
        _, bad_start = readable(lambda: parse_start(start[0], start[1]))
        said = bad_start or f"start from {start[1]}"
        found.append(Computable("started_after_fixes", bad_start is None, said))
    else:  # the audit then takes the time the trainer wrote its config
        fallback = f"{no_line('start')}; the audit would use the modification time of"
        said = f"{fallback} {config_path}" if config is not None else f"{no_line('start')}"
        found.append(Computable("started_after_fixes", config is not None, said))
    printed = ", ".join(str(path) for _, path in printed_texts(out_root, contract))
    for check in ("no_rate_limit_errors", "no_crash"):
        found.append(Computable(check, True, f"searched in {printed or 'no output'}"))
    return found


def planned_run(out_root: Path, matrix: Matrix, run_id: str | None) -> PlannedRun | str:
    """The planned run ``run_id`` names, else the one whose out_root this is (its last two
    parts, benchmark and run id); else why there is none."""
    runs = {run.run_id: run for run in plan(matrix)}
    if run_id is not None:
        return runs.get(run_id) or f"the matrix plans no run {run_id!r} (skilleval ablation plan)"
    tail = out_root.resolve().parts[-2:]
    found = next((run for run in runs.values() if Path(run.out_root).parts[-2:] == tail), None)
    return found or (
        f"{out_root} is no planned run's out_root: name the run this launch stands for with "
        "--run RUN_ID (skilleval ablation plan lists them)"
    )


# What only a launch by the workflow records: which other processes held the out_root.
LAUNCH_ONLY = "single_writer"


def launched_by_workflow(out_root: Path) -> bool:
    """Whether the workflow launched this run: its summary.json is the workflow's record
    (a trainer launched by hand leaves its own results there, or nothing)."""
    try:
        AblationSummary.read(out_root / "summary.json")
    except (OSError, ValueError, SkillevalError):
        return False
    return True


def audit_checks(out_root: Path, run: PlannedRun, matrix: Matrix, launched: bool) -> list[Check]:
    """The audit's checks of ``run`` on what ``out_root`` holds: the audit itself where
    the workflow ``launched`` it, else the same checks on the trainer's own files, less
    what only the workflow's launch records (named, not judged)."""
    if launched:
        audit = audit_run(run, matrix, str(out_root / "summary.json"))
        return [Check(c["name"], c["passed"], c["detail"]) for c in audit["checks"]]
    contract = TrainerContract.of(matrix)
    try:
        results = results_of(out_root, contract)
        summary = {
            "empty_response_fraction": (results or ({}, ""))[0].get("empty_response_fraction")
        }
        config_path = out_root / contract.config_file
        config = contract.audit_keys(flatten(read_mapping(config_path)))
    except TrainerOutputError as unreadable:
        return [Check("trainer_output_readable", False, str(unreadable))]
    printed = printed_texts(out_root, contract)
    files = RunFiles(summary, config, config_path, *first_log(printed), contract, printed)
    checks = parameter_checks(run, matrix, files) + invalid_run_checks(run, matrix, files)
    return [c for c in checks if c.name != LAUNCH_ONLY]


def cmd_trainer_check(args: argparse.Namespace) -> int:
    matrix = load_matrix(args.matrix)
    out_root = Path(args.out_root)
    found = trainer_check(out_root, TrainerContract.of(matrix))
    cannot = [f for f in found if not f.computable]
    print(f"trainer output {args.out_root}, read through the contract of {args.matrix}:")
    print("\n".join(f.line() for f in found))
    print(
        f"{len(found) - len(cannot)} of {len(found)} audit checks can be computed"
        + (f"; the audit would fail {', '.join(f.check for f in cannot)}" if cannot else "")
    )
    run = planned_run(out_root, matrix, args.run)
    if isinstance(run, str):
        print(f"the audit's verdict: not judged: {run}")
        return 1
    launched = launched_by_workflow(out_root)
    checks = audit_checks(out_root, run, matrix, launched)
    failing = [c.name for c in checks if not c.passed]
    print(f"the audit's verdict on it as run {run.run_id}:")
    print("\n".join(f"  {'pass' if c.passed else 'FAIL'} {c.name}: {c.detail}" for c in checks))
    if not launched:
        print(f"  (not judged here: {LAUNCH_ONLY}, which only the workflow's launch records)")
    print(f"{'invalid: ' + ', '.join(failing) + ' failed' if failing else 'valid'}")
    return 1 if cannot or failing else 0


def add_trainer_command(sub: Any) -> None:
    trainer = sub.add_parser("trainer", help="the ablation trainer: check what it writes")
    commands = trainer.add_subparsers(dest="trainer_command", required=True)
    check = commands.add_parser(
        "check", help="what the audit can read of one finished out_root, and its verdict"
    )
    check.add_argument("out_root", help="a finished run's out_root")
    check.add_argument("--matrix", default="config/ablation/matrix.yaml", help="ablation matrix")
    check.add_argument(
        "--run", help="the planned run this out_root stands for (default: the one whose it is)"
    )
    check.set_defaults(func=cmd_trainer_check)
