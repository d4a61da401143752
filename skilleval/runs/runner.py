"""Running many episodes at once: bounded concurrency and retries.

Only episodes that fail on infrastructure (a transport error, a 5xx, a step that may have
been applied, an episode the server lost) are restarted from a fresh episode with backoff
and never scored, each restart counted by its kind. A slow episode is never restarted:
restarting it would resample the evidence toward short episodes; its deadline, if the
protocol sets one, ends it inside the rollout loop (stop_reason timeout), scored as
ended. Hung requests end at the client's request timeout, a transport error. A server
outage past its budget stops the run. An unexpected exception in one episode is logged with
its traceback and its task listed at the end; the other episodes go on, but the run's
outputs are not written.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from skilleval.env.rollout import EpisodeResult
from skilleval.errors import (
    AnswererChanged,
    ContractBreach,
    CoverageError,
    InfrastructureError,
    OutageError,
    ServerRefusal,
)
from skilleval.logs import also_to_terminal
from skilleval.runs.journal import Journal, RecordKey
from skilleval.serving.outage import RetryLedger, backoff_s

log = logging.getLogger(__name__)
EpisodeFn = Callable[[str, int], EpisodeResult]
# What stops the whole run rather than one episode: no retry of any episode cures it.
RUN_STOPPERS = (OutageError, ServerRefusal, ContractBreach, AnswererChanged)
PROGRESS_POLL_S = 0.5  # longest wait for an event, so progress lines keep coming
# How often a run's progress also reaches the build's terminal (the job's own stderr,
# which the log redirect leaves as sys.__stderr__): often enough to see a long run move,
# rarely enough not to bury Snakemake's job lines.
TERMINAL_EVERY_S = 30.0


@dataclass
class RunStats:
    total: int
    reused: int = 0
    done: int = 0
    retried: int = 0
    infra_errors: dict[str, int] = field(default_factory=dict)
    task_errors: int = 0
    ledger: RetryLedger = field(default_factory=RetryLedger)
    started: float = field(default_factory=time.monotonic)

    def line(self, run: str) -> str:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        finished = self.reused + self.done
        rate = self.done / elapsed
        left = self.total - finished
        eta = "done" if left == 0 else f"eta {left / rate:.0f}s" if rate > 0 else "eta unknown"
        retries = ", ".join(f"{k} {n}" for k, n in self.ledger.snapshot().items()) or "none"
        return (
            f"[{run}] {finished}/{self.total} tasks ({100 * finished / self.total:.0f}%), "
            f"{rate:.2f} tasks/s, {eta}, reused {self.reused}, episode restarts "
            f"{self.retried}, task errors {self.task_errors}, retries: {retries}"
        )


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 6
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0

    def delay(self, attempt: int, retry_after_s: float | None) -> float:
        return backoff_s(attempt, self.base_delay_s, self.max_delay_s, retry_after_s)


class _Schedule:
    """The queue of one run: pending keys, their attempts and backoff, episodes in flight."""

    def __init__(self, pending: list[RecordKey], retry: RetryPolicy, stats: RunStats) -> None:
        self.queue = list(pending)
        self.attempts: dict[RecordKey, int] = dict.fromkeys(pending, 0)
        self.not_before: dict[RecordKey, float] = {}
        self.in_flight: dict[Future[EpisodeResult], RecordKey] = {}
        self.failures: dict[RecordKey, str] = {}
        self.crashed: dict[RecordKey, str] = {}
        self.retry, self.stats = retry, stats

    def submit_ready(self, pool: ThreadPoolExecutor, episode: EpisodeFn, concurrency: int) -> float:
        """Start what may start now; return how long to wait for the next event."""
        now = time.monotonic()
        ready = [k for k in self.queue if self.not_before.get(k, 0.0) <= now]
        while ready and len(self.in_flight) < concurrency:
            key = ready.pop(0)
            self.queue.remove(key)
            self.attempts[key] += 1
            self.in_flight[pool.submit(episode, *key)] = key
        wait_s = PROGRESS_POLL_S
        if self.queue and not ready:
            wait_s = min(wait_s, min(self.not_before[k] for k in self.queue) - now)
        return max(wait_s, 0.0)

    def collect(self, done: Iterable[Future[EpisodeResult]], journal: Journal) -> None:
        """Journal every finished episode of ``done``; a reason to stop the run (an outage,
        a refusal, a breach of the adapter's contract) is raised once the others are kept."""
        stop: Exception | None = None
        for future in done:
            key = self.in_flight.pop(future)
            try:
                result = future.result()
            except InfrastructureError as exc:
                self.retry_later(key, str(exc), exc.retry_after_s, exc.kind)
                continue
            except RUN_STOPPERS as exc:
                stop = stop or exc
                continue
            except Exception as exc:  # one episode's bug must not take the others down
                log.exception("task %s repeat %d crashed", key[0], key[1])
                self.crashed[key] = f"{type(exc).__name__}: {exc}"
                continue
            journal.append(result.journal_line())
            self.stats.done += 1
            self.stats.task_errors += result.error is not None
        if stop is not None:
            raise stop

    def retry_later(
        self, key: RecordKey, reason: str, retry_after_s: float | None, kind: str
    ) -> None:
        self.stats.infra_errors[kind] = self.stats.infra_errors.get(kind, 0) + 1
        self.stats.ledger.count("episode", kind)
        if self.attempts[key] >= self.retry.max_attempts:
            self.failures[key] = reason
            log.error("task %s repeat %d gave up: %s", key[0], key[1], reason)
            return
        self.stats.retried += 1
        delay = self.retry.delay(self.attempts[key], retry_after_s)
        log.warning("task %s repeat %d: %s; retry in %.2fs", key[0], key[1], reason, delay)
        self.not_before[key] = time.monotonic() + delay
        self.queue.append(key)


def longest_expected_first(
    keys: Iterable[RecordKey], expected_steps: Mapping[str, float]
) -> list[RecordKey]:
    """``keys`` with the longest expected episodes first, so that the last minutes of a run
    are not a few long episodes on an idle server; a task of unknown length counts as the
    mean. Without any expectation the order is kept. Results cannot depend on the order:
    an episode's randomness is its task's, and records are written in key order."""
    keys = list(keys)
    if not expected_steps:
        return keys
    mean = sum(expected_steps.values()) / len(expected_steps)
    return sorted(keys, key=lambda key: -expected_steps.get(key[0], mean))


def run_episodes(
    keys: Iterable[RecordKey],
    episode: EpisodeFn,
    journal: Journal,
    concurrency: int,
    run_name: str,
    retry: RetryPolicy | None = None,
    progress_every_s: float = 2.0,
    ledger: RetryLedger | None = None,
) -> RunStats:
    """Run every key not yet in the journal; append each finished episode as it lands."""
    retry = retry or RetryPolicy()
    all_keys = list(keys)
    pending = [k for k in all_keys if k not in journal.records]
    reused_errors = sum(
        journal.records[k].get("error") is not None for k in set(all_keys) - set(pending)
    )
    stats = RunStats(
        total=len(all_keys), reused=len(all_keys) - len(pending), task_errors=reused_errors
    )
    stats.ledger = ledger or stats.ledger
    log.info(stats.line(run_name))
    also_to_terminal(stats.line(run_name))
    last_terminal = time.monotonic()
    schedule = _Schedule(pending, retry, stats)
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix=f"ep-{run_name}")
    last_report = time.monotonic()
    try:
        while schedule.queue or schedule.in_flight:
            wait_s = schedule.submit_ready(pool, episode, concurrency)
            done, _ = wait(list(schedule.in_flight), timeout=wait_s, return_when=FIRST_COMPLETED)
            schedule.collect(done, journal)
            if time.monotonic() - last_report >= progress_every_s:
                log.info(stats.line(run_name))
                last_report = time.monotonic()
            if time.monotonic() - last_terminal >= TERMINAL_EVERY_S:
                also_to_terminal(stats.line(run_name))
                last_terminal = time.monotonic()
    except RUN_STOPPERS as stop:
        finished = stats.reused + stats.done
        raise type(stop)(
            f"run {run_name!r} stopped: {stop}. {finished}/{stats.total} tasks finished, "
            f"kept in {journal.path}"
        ) from None
    finally:
        stats.ledger.halt()  # episodes waiting on a server give up now
        pool.shutdown(wait=False, cancel_futures=True)
    log.info(stats.line(run_name))
    also_to_terminal(stats.line(run_name))
    _refuse_incomplete(schedule, run_name, retry, journal)
    return stats


def _refuse_incomplete(
    schedule: _Schedule, run_name: str, retry: RetryPolicy, journal: Journal
) -> None:
    if schedule.crashed:
        listed = "; ".join(f"{k[0]}#{k[1]}: {v}" for k, v in schedule.crashed.items())
        raise CoverageError(
            f"run {run_name!r}: {len(schedule.crashed)} task(s) crashed ({listed}); their "
            f"tracebacks are in the run log. Finished tasks are kept in {journal.path}; fix "
            "the cause and re-run to resume."
        )
    if schedule.failures:
        failures = schedule.failures
        sample = "; ".join(f"{k[0]}#{k[1]}: {v}" for k, v in list(failures.items())[:5])
        raise CoverageError(
            f"run {run_name!r}: {len(failures)} task(s) failed on infrastructure after "
            f"{retry.max_attempts} attempts each ({sample}). Finished tasks are kept in "
            f"{journal.path}; fix the service and re-run to resume."
        )
