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
    attempts: dict[RecordKey, int] = dict.fromkeys(pending, 0)
    not_before: dict[RecordKey, float] = {}
    queue = list(pending)
    in_flight: dict[Future[EpisodeResult], tuple[RecordKey, float]] = {}
    failures: dict[RecordKey, str] = {}
    # Abandoned (hung) episodes keep their threads; spare workers keep the run moving.
    pool = ThreadPoolExecutor(max_workers=concurrency + 64, thread_name_prefix=f"ep-{run_name}")
    last_report = time.monotonic()
    try:
        while queue or in_flight:
            now = time.monotonic()
            ready = [k for k in queue if not_before.get(k, 0.0) <= now]
            while ready and len(in_flight) < concurrency:
                key = ready.pop(0)
                queue.remove(key)
                attempts[key] += 1
                in_flight[pool.submit(episode, *key)] = (key, now + episode_timeout_s)
            timeout = min([d for _, d in in_flight.values()], default=now + 0.05) - now
            if queue and not ready:
                timeout = min(timeout, min(not_before[k] for k in queue) - now)
            done, _ = wait(list(in_flight), timeout=max(timeout, 0.0), return_when=FIRST_COMPLETED)
            now = time.monotonic()
            for future in done:
                key, _ = in_flight.pop(future)
                try:
                    result = future.result()
                except InfrastructureError as exc:
                    _schedule_retry(
                        key,
                        str(exc),
                        exc.retry_after_s,
                        attempts,
                        retry,
                        stats,
                        queue,
                        not_before,
                        failures,
                    )
                    continue
                journal.append(result.as_record())
                stats.done += 1
                stats.task_errors += result.error is not None
            for future, (key, deadline) in list(in_flight.items()):
                if deadline <= now and not future.done():
                    del in_flight[future]
                    future.cancel()
                    _schedule_retry(
                        key,
                        f"episode exceeded {episode_timeout_s}s",
                        None,
                        attempts,
                        retry,
                        stats,
                        queue,
                        not_before,
                        failures,
                    )
            if now - last_report >= progress_every_s:
                log.info(stats.line(run_name))
                last_report = now
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    log.info(stats.line(run_name))
    if failures:
        sample = "; ".join(f"{k[0]}#{k[1]}: {v}" for k, v in list(failures.items())[:5])
        raise CoverageError(
            f"run {run_name!r}: {len(failures)} task(s) failed on infrastructure after "
            f"{retry.max_attempts} attempts each ({sample}). Finished tasks are kept in "
            f"{journal.path}; fix the service and re-run to resume."
        )
    return stats


def _schedule_retry(
    key: RecordKey,
    reason: str,
    retry_after_s: float | None,
    attempts: dict[RecordKey, int],
    retry: RetryPolicy,
    stats: RunStats,
    queue: list[RecordKey],
    not_before: dict[RecordKey, float],
    failures: dict[RecordKey, str],
) -> None:
    kind = reason.split(":")[0][:60]
    stats.infra_errors[kind] = stats.infra_errors.get(kind, 0) + 1
    if attempts[key] >= retry.max_attempts:
        failures[key] = reason
        log.error("task %s repeat %d gave up: %s", key[0], key[1], reason)
        return
    stats.retried += 1
    delay = retry.delay(attempts[key], retry_after_s)
    log.warning("task %s repeat %d: %s; retry in %.2fs", key[0], key[1], reason, delay)
    not_before[key] = time.monotonic() + delay
    queue.append(key)
