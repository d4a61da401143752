"""``skilleval env check``: the environment adapter's contract, run against the live server
before any card is paid for.

It reads the config as the workflow does (frozen protocols included), opens a few episodes
of the protocol's split through the configured adapter (built in or a lab's), two of them
at once, and runs skilleval/env/contract.py on them: tools, start, steps on every tool with
arguments from its own schema, with missing and unusable ones and on an unknown tool, the
protocol's metrics in their ranges and stable, the same task started twice, each
episode's rewards its own, close twice. Each violation is printed with its rule's number
and fix. A model run checks the tools, start and metrics part itself before it leases a
card, and every episode's rewards as they are recorded.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skilleval.config.model import Config
from skilleval.env.adapters import IDENTITY_KEY
from skilleval.env.contract import FIXES, TRANSIENT, Violation, contract_violations
from skilleval.errors import OutageError, SkillevalError
from skilleval.runs.backends import metric_contract, run_environment, undeclared_metrics
from skilleval.runs.inputs import RunInputs
from skilleval.serving.outage import RetryLedger
from skilleval.workflow.plan import WorkflowPlan


@dataclass(frozen=True)
class EnvCheck:
    """What was checked and what broke."""

    adapter: str
    url: str | None
    task_ids: list[str]
    violations: list[Violation]

    @property
    def breaches(self) -> list[Violation]:
        return [v for v in self.violations if v.rule != TRANSIENT]

    def report(self) -> str:
        where = f" at {self.url}" if self.url else ""
        head = f"environment adapter {self.adapter}{where}, tasks {', '.join(self.task_ids)}:"
        met = [v for v in self.violations if v.rule == TRANSIENT]
        notes = [f"  transient: {v}" for v in met]
        if not self.breaches:
            return "\n".join([f"{head} keeps the contract (skilleval/env/contract.py)", *notes])
        lines = [f"{head} {len(self.breaches)} violation(s) of skilleval/env/contract.py"]
        lines += [f"  - rule {problem.rule}: {problem}" for problem in self.breaches]
        rules = sorted({problem.rule for problem in self.breaches})
        lines += [f"  fix of rule {rule}: {FIXES[rule]}" for rule in rules]
        return "\n".join([*lines, *notes])


def protocol_inputs(config: Config, protocol: str | None) -> RunInputs:
    """The inputs of the first run of ``protocol`` (of the only protocol runs use, if
    none is named), with the config's execution settings (the server's address)."""
    plan = WorkflowPlan(config)
    used = sorted({run.protocol for run in plan.runs.values()})
    name = protocol or (used[0] if len(used) == 1 else None)
    if name is None or name not in used:
        raise SkillevalError(
            f"name the protocol to check with --protocol, one of those runs use: {', '.join(used)}"
        )
    run = next(r for r in plan.runs.values() if r.protocol == name)
    return plan.run_inputs(run).executed_with(config.protocols[name].execution)


def split_task_ids(split_file: str, split: str, n_tasks: int) -> list[str]:
    if not Path(split_file).is_file():
        raise SkillevalError(
            f"the split file {split_file} does not exist yet; build it first "
            f"(snakemake {split_file}) or point tasks.split_file at the lab's split"
        )
    tasks = json.loads(Path(split_file).read_text())[split]
    return [str(task["task_id"]) for task in tasks[:n_tasks]]


def env_check(
    config: Config, protocol: str | None = None, n_tasks: int = 3, wait_s: float = 0
) -> EnvCheck:
    """The contract run on the protocol's environment; ``wait_s``: how long a busy or
    unreachable server is waited for (a run waits its outage budget)."""
    inputs = protocol_inputs(config, protocol)
    backend = inputs.backends["environment"]
    adapter = inputs.backends.get(IDENTITY_KEY, backend)  # a lab's: its planned identity
    task_ids = split_task_ids(inputs.split_file, inputs.split, max(n_tasks, 2))
    url = None if backend == "shopsim" else inputs.environment().url
    try:
        environment = run_environment(inputs, RetryLedger(), wait_s)
        metrics = metric_contract(inputs, environment)
        # The run refuses an adapter that declares too few metrics before any episode.
        missing = undeclared_metrics(inputs, environment, metrics)
        violations = [Violation(4, missing)] if missing else []
        violations += contract_violations(environment, task_ids, metrics)
    except OutageError as absent:
        # env check waits --wait seconds, not the run's outage budget: say so.
        last = absent.last_error or str(absent)
        raise SkillevalError(
            f"the environment server {url} did not answer within --wait {wait_s:g} s ({last}); "
            "start it, or give --wait SECONDS for one that is starting"
        ) from None
    return EnvCheck(adapter, url, task_ids, violations)


def cmd_env_check(args: argparse.Namespace) -> int:
    from skilleval.workflow.as_snakemake import snakemake_config

    config = snakemake_config(Path(args.root), args.configfile or [], args.profile)
    checked = env_check(config, args.protocol, args.tasks, args.wait)
    print(checked.report())
    return 1 if checked.breaches else 0


def add_env_command(sub: Any) -> None:
    env = sub.add_parser("env", help="the environment adapter: check it against its server")
    commands = env.add_subparsers(dest="env_command", required=True)
    check = commands.add_parser(
        "check", help="run the adapter contract on a few episodes of the live environment"
    )
    check.add_argument("--configfile", action="extend", nargs="+", help="as given to snakemake")
    check.add_argument("--profile", help="as given to snakemake")
    check.add_argument("--root", default=".", help="workflow directory")
    check.add_argument(
        "--protocol", help="the protocol whose environment to check (needed when runs use several)"
    )
    check.add_argument("--tasks", type=int, default=3, help="episodes to open (two at least)")
    check.add_argument(
        "--wait", type=float, default=0.0, help="seconds to wait for a busy or absent server"
    )
    check.set_defaults(func=cmd_env_check)
