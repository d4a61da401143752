"""Running many episodes at once: bounded concurrency, per-episode deadlines, retries.

Infrastructure failures and episodes that outlive their deadline are retried with
exponential backoff (honouring a server's Retry-After) and never scored. A hung episode
is abandoned, not waited for, so the last task of a run cannot hang it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from skilleval.errors import CoverageError, InfrastructureError
from skilleval.runs.journal import Journal, RecordKey
from skilleval.runs.rollout import EpisodeResult

log = logging.getLogger(__name__)
EpisodeFn = Callable[[str, int], EpisodeResult]


@dataclass
class RunStats:
    total: int
    reused: int = 0
    done: int = 0
    retried: int = 0
    infra_errors: dict[str, int] = field(default_factory=dict)
    task_errors: int = 0
    started: float = field(default_factory=time.monotonic)

    def line(self, run: str) -> str:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        finished = self.reused + self.done
        rate = self.done / elapsed
        eta = (self.total - finished) / rate if rate > 0 else float("nan")
        return (
            f"[{run}] {finished}/{self.total} tasks ({100 * finished / self.total:.0f}%), "
            f"{rate:.1f} tasks/s, eta {eta:.0f}s, reused {self.reused}, "
            f"infra retries {self.retried}, task errors {self.task_errors}"
        )


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 6
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0

    def delay(self, attempt: int, retry_after_s: float | None) -> float:
        """Exponential backoff, never shorter than the server's Retry-After."""
        backoff = min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1))
        return float(max(backoff, retry_after_s or 0.0))


class _Schedule:
    """The queue of one run: pending keys, their attempts and backoff, episodes in flight."""

    def __init__(self, pending: list[RecordKey], retry: RetryPolicy, stats: RunStats) -> None:
        self.queue = list(pending)
        self.attempts: dict[RecordKey, int] = dict.fromkeys(pending, 0)
        self.not_before: dict[RecordKey, float] = {}
        self.in_flight: dict[Future[EpisodeResult], tuple[RecordKey, float]] = {}
        self.failures: dict[RecordKey, str] = {}
        self.retry, self.stats = retry, stats

    def submit_ready(
        self, pool: ThreadPoolExecutor, episode: EpisodeFn, concurrency: int, timeout_s: float
    ) -> float:
        """Start what may start now; return how long to wait for the next event."""
        now = time.monotonic()
        ready = [k for k in self.queue if self.not_before.get(k, 0.0) <= now]
        while ready and len(self.in_flight) < concurrency:
            key = ready.pop(0)
            self.queue.remove(key)
            self.attempts[key] += 1
            self.in_flight[pool.submit(episode, *key)] = (key, now + timeout_s)
        wait_s = min([d for _, d in self.in_flight.values()], default=now + 0.05) - now
        if self.queue and not ready:
            wait_s = min(wait_s, min(self.not_before[k] for k in self.queue) - now)
        return max(wait_s, 0.0)

    def collect(self, done: set[Future[EpisodeResult]], journal: Journal) -> None:
        for future in done:
            key, _ = self.in_flight.pop(future)
            try:
                result = future.result()
            except InfrastructureError as exc:
                self.retry_later(key, str(exc), exc.retry_after_s)
                continue
            journal.append(result.as_record())
            self.stats.done += 1
            self.stats.task_errors += result.error is not None

    def expire(self, timeout_s: float) -> None:
        """Abandon hung episodes (their threads run on) and retry their tasks."""
        now = time.monotonic()
        for future, (key, deadline) in list(self.in_flight.items()):
            if deadline <= now and not future.done():
                del self.in_flight[future]
                future.cancel()
                self.retry_later(key, f"episode exceeded {timeout_s}s", None)

    def retry_later(self, key: RecordKey, reason: str, retry_after_s: float | None) -> None:
        kind = reason.split(":")[0][:60]
        self.stats.infra_errors[kind] = self.stats.infra_errors.get(kind, 0) + 1
        if self.attempts[key] >= self.retry.max_attempts:
            self.failures[key] = reason
            log.error("task %s repeat %d gave up: %s", key[0], key[1], reason)
            return
        self.stats.retried += 1
        delay = self.retry.delay(self.attempts[key], retry_after_s)
        log.warning("task %s repeat %d: %s; retry in %.2fs", key[0], key[1], reason, delay)
        self.not_before[key] = time.monotonic() + delay
        self.queue.append(key)


def run_episodes(
    keys: Iterable[RecordKey],
    episode: EpisodeFn,
    journal: Journal,
    concurrency: int,
    episode_timeout_s: float,
    run_name: str,
    retry: RetryPolicy | None = None,
    progress_every_s: float = 2.0,
) -> RunStats:
    """Run every key not yet in the journal; append each finished episode as it lands."""
    retry = retry or RetryPolicy()
    all_keys = list(keys)
    pending = [k for k in all_keys if k not in journal.records]
    stats = RunStats(total=len(all_keys), reused=len(all_keys) - len(pending))
    log.info(stats.line(run_name))
    schedule = _Schedule(pending, retry, stats)
    # Abandoned (hung) episodes keep their threads; spare workers keep the run moving.
    pool = ThreadPoolExecutor(max_workers=concurrency + 64, thread_name_prefix=f"ep-{run_name}")
    last_report = time.monotonic()
    try:
        while schedule.queue or schedule.in_flight:
            wait_s = schedule.submit_ready(pool, episode, concurrency, episode_timeout_s)
            done, _ = wait(list(schedule.in_flight), timeout=wait_s, return_when=FIRST_COMPLETED)
            schedule.collect(done, journal)
            schedule.expire(episode_timeout_s)
            if time.monotonic() - last_report >= progress_every_s:
                log.info(stats.line(run_name))
                last_report = time.monotonic()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    log.info(stats.line(run_name))
    if schedule.failures:
        failures = schedule.failures
        sample = "; ".join(f"{k[0]}#{k[1]}: {v}" for k, v in list(failures.items())[:5])
        raise CoverageError(
            f"run {run_name!r}: {len(failures)} task(s) failed on infrastructure after "
            f"{retry.max_attempts} attempts each ({sample}). Finished tasks are kept in "
            f"{journal.path}; fix the service and re-run to resume."
        )
    return stats
