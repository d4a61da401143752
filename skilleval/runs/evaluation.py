"""One evaluation run: inputs resolved once -> server -> rollouts -> journal -> summary.

An interrupted run resumes from its journal; a run whose evidence identity changed starts
afresh while its old journal is archived. A run whose identity equals that of a complete
result restores that result and stops there: no card leased, no server started. The
declared outputs are written only at the coverage the protocol requires.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from skilleval.env.rollout import EpisodeResult, run_episode
from skilleval.errors import CoverageError, OutageError, ServerRefusal
from skilleval.logs import resume_command
from skilleval.protocol.sections import ModelServer
from skilleval.provenance.evidence import model_run_code
from skilleval.records.env import Environment
from skilleval.records.policy import Policy
from skilleval.records.runs import RunSummary
from skilleval.runs.answered import AnswerGate, answered_summary
from skilleval.runs.backends import (
    make_policy,
    make_service,
    metric_contract,
    refuse_broken_environment,
    run_environment,
)
from skilleval.runs.inputs import RunInputs
from skilleval.runs.journal import Journal, prior_episode_steps
from skilleval.runs.resolve import ResolvedRun, resolve
from skilleval.runs.runner import (
    EpisodeFn,
    RetryPolicy,
    RunStats,
    longest_expected_first,
    run_episodes,
)
from skilleval.runs.summary import run_summary, written
from skilleval.runs.transcripts import split_record, write_transcripts
from skilleval.serving.launcher import owned_server
from skilleval.serving.outage import RetryLedger
from skilleval.storage import atomic

log = logging.getLogger(__name__)


@contextlib.contextmanager
def served(kind: str, run: str, checkpoint_path: str, server: ModelServer) -> Iterator[ModelServer]:
    """The model server settings of the run: those of config, or, where the job launches
    its own server on leased cards and a leased port, that server's."""
    if kind not in ("process", "docker"):
        yield server
        return
    with owned_server(kind, run, checkpoint_path, server) as base_url:
        yield server.model_copy(update={"base_url": base_url, "launched": True})


def evaluate(
    inputs: RunInputs,
    results_path: str,
    summary_path: str,
    journal_root: str,
    fault_rate: float = 0.0,
    retry: RetryPolicy | None = None,
    code: Mapping[str, str] | None = None,
    transcripts_path: str | None = None,
) -> dict[str, Any]:
    """``code``: the run's evidence code as the graph computed it (params); computed here
    when the run is started outside the graph. ``transcripts_path``: where the episodes'
    transcripts go (beside the results, by default)."""
    started = time.monotonic()
    code = dict(code) if code is not None else model_run_code()
    resolved = resolve(inputs, code)
    outputs = {
        "results.jsonl": results_path,
        "summary.json": summary_path,
        "transcripts.jsonl.gz": transcripts_path or f"{results_path}.transcripts.jsonl.gz",
    }
    journal = Journal(
        Path(journal_root), inputs.run, resolved.fingerprint, dict(resolved.identity.parts), code
    )
    with journal:
        if journal.complete.restore(outputs):
            log.info(
                "run %s: evidence unchanged (fingerprint %s): its complete result is restored "
                "from %s; no card leased, no server started",
                inputs.run,
                resolved.fingerprint,
                journal.complete_dir,
            )
            return RunSummary.read(summary_path).as_json()
        record = _evaluate(inputs, resolved, journal, outputs, fault_rate, retry, started)
        journal.complete.keep(outputs)
    return record


def _evaluate(
    inputs: RunInputs,
    resolved: ResolvedRun,
    journal: Journal,
    outputs: Mapping[str, str],
    fault_rate: float,
    retry: RetryPolicy | None,
    started: float,
) -> dict[str, Any]:
    server = inputs.model_server()
    kind = inputs.backends.get("model_server", "none")
    budget_s = inputs.execution().outage_budget_s
    ledger = RetryLedger()
    environment, unchecked = checked_environment(inputs, resolved, journal, ledger)
    with served(kind, inputs.run, inputs.checkpoint_path, server) as running:
        identity_ledger = RetryLedger()
        service = make_service(inputs, running, budget_s, identity_ledger)
        with resume_hint(inputs.run, outputs["summary.json"]):
            service_start = service.check()
        assert service.answerer is not None
        launched_name = service.model if running.launched else None
        gate = AnswerGate(inputs.run, service.answerer, journal.records.values(), launched_name)
        policy = make_policy(inputs, service, ledger, fault_rate)
        episode = episode_runner(inputs, resolved, policy, environment, gate)
        with resume_hint(inputs.run, outputs["summary.json"]):
            tools_in_prompt = before_first_episode(
                inputs, resolved, journal, policy, environment, unchecked
            )
            lines, stats = _run_all(inputs, resolved, episode, journal, retry, ledger)
        with end_check_hint(inputs.run, len(lines), journal, outputs["summary.json"]):
            service_end = service.identity()
        service.confirm(inputs.run, "at the run's end,", identity=service_end)
    records = [split_record(line)[0] for line in lines]
    summary = run_summary(inputs, resolved, records, service, (service_start, service_end))
    summary["service"].update(
        tools_in_prompt=tools_in_prompt, identity_retries=identity_ledger.snapshot()
    )
    summary["service"]["answered"].update(answered_summary(records, gate))
    summary.update(written(journal, stats, started))
    return write_outputs(outputs, records, lines, summary, inputs.run)


def write_outputs(
    outputs: Mapping[str, str],
    records: list[dict[str, Any]],
    lines: list[dict[str, Any]],
    summary: dict[str, Any],
    run: str,
) -> dict[str, Any]:
    """The run's declared outputs: its results, transcripts and summary, last."""
    atomic.write_jsonl(outputs["results.jsonl"], records)
    write_transcripts(outputs["transcripts.jsonl.gz"], lines)
    record = RunSummary.create(**summary)
    record.write(outputs["summary.json"])
    log.info(
        "run %s done: reward %.4f, r_success %.4f, coverage %.3f",
        run,
        record.metric("reward"),
        record.metric("r_success"),
        record.coverage,
    )
    return record.as_json()


def before_first_episode(
    inputs: RunInputs,
    resolved: ResolvedRun,
    journal: Journal,
    policy: Policy,
    environment: Environment,
    unchecked: str | None,
) -> dict[str, Any] | None:
    """The checks a run makes once its servers answer and before its first episode: the
    environment not reachable earlier (``unchecked``, a task to check it on), and the
    model's preflight with its proof that the tools reach the model, whose token counts
    are returned (None where no episode is left to run or the policy runs in process)."""
    if unchecked is not None:
        refuse_broken_environment(inputs, unchecked, environment)
    preflight = getattr(policy, "preflight", None)
    if preflight is None or all(key in journal.records for key in resolved.keys):
        return None
    return dict(preflight(environment.tools()))


def episode_runner(
    inputs: RunInputs,
    resolved: ResolvedRun,
    policy: Policy,
    environment: Environment,
    gate: AnswerGate,
) -> EpisodeFn:
    """One episode of the run, its rewards checked against the protocol's metrics as it
    ends (env.metrics) and stamped with what answered it (runs.answered): a breach or
    another model stops the run before the episode is recorded."""
    max_steps = inputs.protocol.runtime.max_steps
    deadline_s = inputs.protocol.runtime.episode_timeout_s
    metrics = metric_contract(inputs, environment)

    def episode(task_id: str, repeat: int) -> EpisodeResult:
        prompt = resolved.prompts[task_id]
        ended = run_episode(policy, environment, task_id, prompt, max_steps, repeat, deadline_s)
        metrics.check(task_id, ended.rewards)
        return gate.stamp(ended)

    return episode


def checked_environment(
    inputs: RunInputs, resolved: ResolvedRun, journal: Journal, ledger: RetryLedger
) -> tuple[Environment, str | None]:
    """The run's environment, once it lists its tools and opens an episode of the first
    task left (env.contract), before any card is leased; with the task to check it on
    before the first episode where its server did not answer yet (else None)."""
    left = [key for key in resolved.keys if key not in journal.records]
    checked = not left or refuse_broken_environment(inputs, left[0][0])
    return run_environment(inputs, ledger), None if checked else left[0][0]


@contextlib.contextmanager
def resume_hint(run: str, summary_path: str) -> Iterator[None]:
    """Complete a run-stopping outage's message with the command that resumes the run:
    the user's own build command, config files, profile and targets included."""
    try:
        yield
    except OutageError as outage:
        raise OutageError(
            f"{outage}. Once the server is back, resume with: "
            f"{resume_command(summary_path)} (run {run}; finished tasks are reused)"
        ) from None


@contextlib.contextmanager
def end_check_hint(run: str, episodes: int, journal: Journal, summary_path: str) -> Iterator[None]:
    """A run whose episodes are all done keeps them when its end-of-run identity check
    cannot be made: the message says so and names the one command that finishes it."""
    try:
        yield
    except OutageError as outage:
        raise OutageError(
            f"run {run}: all {episodes} episodes are done and kept in {journal.path}, but the "
            f"end-of-run identity check could not be made ({outage}), so its outputs are not "
            f"written yet. Once the server answers, finish it with: "
            f"{resume_command(summary_path)} (no episode runs again)"
        ) from None


def _run_all(
    inputs: RunInputs,
    resolved: ResolvedRun,
    episode: EpisodeFn,
    journal: Journal,
    retry: RetryPolicy | None,
    ledger: RetryLedger,
) -> tuple[list[dict[str, Any]], RunStats]:
    """Every episode not yet journaled; refuses to go on below the required coverage."""
    runtime = inputs.protocol.runtime
    log.info(
        "run %s (%s): fingerprint %s, %d episodes, protocol %s",
        inputs.run,
        inputs.experiment,
        resolved.fingerprint,
        len(resolved.keys),
        inputs.protocol_name,
    )
    expected = prior_episode_steps(journal.dir.parent, inputs.run, {k[0] for k in resolved.keys})
    log.info(
        "episode order: %s",
        f"longest expected first ({len(expected)} tasks' lengths from earlier runs)"
        if expected
        else "as listed (no earlier run of these tasks)",
    )
    stats = run_episodes(
        longest_expected_first(resolved.keys, expected),
        episode,
        journal,
        runtime.concurrency,
        inputs.run,
        retry,
        ledger=ledger,
    )
    records = [journal.records[k] for k in sorted(resolved.keys) if k in journal.records]
    journal_path = str(journal.path)
    required = inputs.protocol.metrics.required_coverage
    if len(records) / len(resolved.keys) < required:
        raise CoverageError(
            f"run {inputs.run!r}: coverage {len(records)}/{len(resolved.keys)} is below the "
            f"required {required}; finished tasks are kept in {journal_path}. Re-run to resume."
        )
    refuse_all_refused(inputs.run, records, journal_path)
    return records, stats


# Episodes the server ended by refusing a request (rollout END_REASONS).
REFUSED = frozenset({"rejected_request", "context_overflow"})


def refuse_all_refused(run: str, records: list[dict[str, Any]], journal_path: str) -> None:
    """A run whose every episode the server refused measured nothing of the model: it
    fails, quoting the server, rather than report a reward of refusals."""
    if not records or any(r["stop_reason"] not in REFUSED for r in records):
        return
    raise ServerRefusal(
        f"run {run!r}: the model server refused a request in all {len(records)} episodes "
        f"(first: {records[0]['error']}), so the run measured nothing of the model. Fix the "
        "request (the protocol's values, the server's context length or chat template); the "
        f"refused episodes are kept in {journal_path}: move them aside with "
        f"skilleval clean {run} --archive before the run is built again"
    )
