"""Calling a server through its outages: one retry layer per server, every retry counted.

Every request a run makes to its model or environment server goes through one
``ServerCalls``; nothing beneath it retries (serving.http runs urllib3 with its retries
off).
A failure that cannot be the request's fault (connection refused, timeout, 429, 5xx) is
waited out with exponential backoff, never shorter than the server's Retry-After, for up
to the run's outage budget; then the run stops with an OutageError.
The same failing reply to the same request, repeated, is no outage but a refusal of
that request (a server that validates a field and answers 500): it stops the run within
seconds (ServerRefusal), quoting the server, instead of waiting out the budget. Replies
that say "try later" by definition (429, 502, 503, 504) are always waited out.
The same failure of one request, repeated while the server answers other requests, is
that request's own (a task the server cannot serve), not an outage: it ends the episode
within seconds (InfrastructureError of kind "task_failure"), so that the runner retries
that task a few times and then records it as failed, while the run goes on with the rest.
A request that is not idempotent (an environment step) is retried only when it provably
never reached the server (the connection was refused); any other failure abandons the
episode, since the step may have been applied.
"""

from __future__ import annotations

import email.utils
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from urllib3 import exceptions

from skilleval.errors import InfrastructureError, OutageError, ServerRefusal
from skilleval.logs import also_to_terminal
from skilleval.serving.http import Reply

log = logging.getLogger(__name__)
T = TypeVar("T")
DESCRIBED = {
    "connect": "unreachable",
    "timeout": "not answering in time",
    "transport": "dropping connections",
    "429": "rate-limiting (HTTP 429)",
    "5xx": "failing (HTTP 5xx)",
    "adapter": "failing (its adapter raised InfrastructureError)",
}


# Statuses that say "not now" (RFC 9110 15.6.3-15.6.5, 6585 4): never read as a refusal.
TRY_LATER = frozenset({429, 502, 503, 504})
# How often one request must get the same failing reply before it is a refusal: enough that
# a passing fault rarely repeats word for word, few enough to stop within seconds.
REFUSAL_REPEATS = 3
# How often one request must fail the same way while the server answers others before the
# failure is the request's own: as for a refusal. Only a failure the server gave (a failing
# reply, an adapter's error): one that never reached it (refused, timed out, dropped) is the
# server's, whatever other requests it answered just before.
TASK_FAILURE_REPEATS = 3
ANSWERED_FAILURES = frozenset({"5xx", "adapter"})
# How often a server that is down is said on the build's terminal while it is waited out
# (the run's log hears it every ``report_every_s``): at once, then this often.
TERMINAL_EVERY_S = 30.0


class StatusFailure(Exception):
    """An HTTP reply a retry may cure: 429 or 5xx, with the server's Retry-After."""

    def __init__(self, status: int, headers: Mapping[str, str], message: str) -> None:
        super().__init__(f"HTTP {status}: {message[:300]}")
        self.status = status
        self.body = message
        self.retry_after_s = retry_after(headers.get("Retry-After"))


@dataclass(frozen=True)
class Failure:
    kind: str
    retry_after_s: float | None
    message: str


def backoff_s(failures: int, base_s: float, cap_s: float, retry_after_s: float | None) -> float:
    """The one backoff rule of every retry: doubling from ``base_s`` with each failure so
    far (1 for the first), at most ``cap_s``, never shorter than the server's Retry-After."""
    return float(max(min(cap_s, base_s * 2 ** (failures - 1)), retry_after_s or 0.0))


def retry_after(value: str | None) -> float | None:
    """Retry-After in seconds, given as seconds or as an HTTP date."""
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        return max(email.utils.parsedate_to_datetime(value).timestamp() - time.time(), 0.0)
    except (TypeError, ValueError):
        return None


def raise_if_retryable(response: Reply) -> None:
    """A 429 or 5xx reply as the StatusFailure a retry may cure."""
    if response.status == 429 or response.status >= 500:
        raise StatusFailure(response.status, response.headers, response.text)


def _status_kind(status: int) -> str | None:
    return "429" if status == 429 else "5xx" if status >= 500 else None


def classify(error: BaseException, outages: tuple[type[Exception], ...] = ()) -> Failure | None:
    """What kind of transient failure an exception is; None when a retry cannot help.
    ``outages``: further exception types that say the server is not there (an environment
    adapter's InfrastructureError), waited out as "adapter"."""
    if outages and isinstance(error, outages):
        return Failure("adapter", getattr(error, "retry_after_s", None), str(error))
    if isinstance(error, StatusFailure):
        kind = _status_kind(error.status)
        return Failure(kind, error.retry_after_s, str(error)) if kind else None
    message = f"{type(error).__name__}: {error}"
    # urllib3/exceptions.py: NewConnectionError (refused, unresolvable) is a
    # ConnectTimeoutError, both raised before a byte of the request was sent. urlopen
    # (urllib3/connectionpool.py) turns an OSError or http.client error of a connection that
    # dropped or reset into a ProtocolError, or a ProxyError when the proxy did. A bad URL,
    # a certificate or a reply that cannot be decoded is no outage: no retry cures it.
    if isinstance(error, exceptions.ConnectTimeoutError):
        return Failure("connect", None, message)
    if isinstance(error, exceptions.TimeoutError):
        return Failure("timeout", None, message)
    if isinstance(error, exceptions.ProtocolError | exceptions.ProxyError):
        return Failure("transport", None, message)
    return None


def _reply_of(error: BaseException) -> tuple[int, str] | None:
    """A failing reply that may be a refusal: its status and body; None for a reply that
    says "try later" and for failures without a reply."""
    if isinstance(error, StatusFailure) and error.status not in TRY_LATER:
        return error.status, error.body
    return None


class RetryLedger:
    """Every retry of one run, by layer and kind, and the signal that stops its waits."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._on_halt: list[Callable[[], None]] = []

    def on_halt(self, abort: Callable[[], None]) -> None:
        """Have ``halt`` call ``abort`` (a client's: cut its requests in flight)."""
        self._on_halt.append(abort)

    def halt(self) -> None:
        """Stop the run's waits and cut its requests in flight: a stopped run's threads
        end within seconds, not once their slowest request times out."""
        self.stop.set()
        for abort in self._on_halt:
            abort()

    def count(self, layer: str, kind: str) -> None:
        with self._lock:
            self.counts[f"{layer}/{kind}"] += 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(sorted(self.counts.items()))


@dataclass
class Repeats:
    """How one request has failed so far: the same failure (and the same failing reply) in
    a row, and how many requests the server had answered when it first failed."""

    message: str = ""
    kind: str = ""
    same: int = 0
    reply: tuple[int, str] | None = None
    same_reply: int = 0
    answered_at_first: int = 0

    def add(self, failure: Failure, reply: tuple[int, str] | None, answered: int) -> None:
        if self.same == 0:
            self.answered_at_first = answered
        self.same = self.same + 1 if failure.message == self.message else 1
        self.same_reply = self.same_reply + 1 if reply is not None and reply == self.reply else 1
        self.message, self.kind, self.reply = failure.message, failure.kind, reply


class ServerCalls:
    """The retry layer of one server: outages waited out up to ``budget_s``."""

    def __init__(
        self,
        name: str,
        url: str,
        ledger: RetryLedger,
        budget_s: float,
        base_delay_s: float = 0.25,
        max_delay_s: float = 10.0,
        report_every_s: float = 5.0,
    ) -> None:
        self.name, self.url, self.ledger, self.budget_s = name, url, ledger, budget_s
        self.base_delay_s, self.max_delay_s = base_delay_s, max_delay_s
        self.report_every_s = report_every_s
        self._last_report = 0.0
        self._last_terminal = -TERMINAL_EVERY_S
        self._lock = threading.Lock()
        self.answered = 0  # requests answered so far, by every thread of the run
        self.failed_tasks: dict[str, str] = {}  # task -> the failure found to be its own

    def call(
        self,
        request: Callable[[], T],
        idempotent: bool = True,
        outages: tuple[type[Exception], ...] = (),
        on_retry: Callable[[str], None] | None = None,
        task: str | None = None,
    ) -> T:
        """``request``'s result, waiting out its transient failures (``classify``, with
        ``outages``) up to the budget. ``task``: the task the request is for, so that a
        failure found to be that task's own is known again when its episode is retried
        after the others are done. ``on_retry`` hears the kind of each failure that is
        followed by a retry (a request re-sent after a timeout draws a new sample)."""
        first_failure: float | None = None
        attempt = 0
        seen = Repeats()
        while True:
            if self.ledger.stop.is_set():
                raise InfrastructureError("the run is stopping", kind="stopped")
            try:
                result = request()
            except Exception as error:  # classified below; what no retry can cure is re-raised
                failure = classify(error, outages)
                if failure is None:
                    raise
                seen.add(failure, _reply_of(error), self.answered)
                self._failed(failure, idempotent, error)
                self._stop_repeating(seen, error, task)
            else:
                with self._lock:
                    self.answered += 1
                if first_failure is not None:
                    log.info("%s server %s answers again", self.name, self.url)
                return result
            now = time.monotonic()
            first_failure = now if first_failure is None else first_failure
            self._wait(failure, now - first_failure, attempt)
            if on_retry is not None:  # the wait is over: the request goes out again
                on_retry(failure.kind)
            attempt += 1

    def _stop_repeating(self, seen: Repeats, error: Exception, task: str | None) -> None:
        """End the wait for one request that keeps failing the same way: its task's own
        failure while others are answered (or as before for its task), else a refusal when
        the reply is the same."""
        known = task is not None and self.failed_tasks.get(task) == seen.message
        others = self.answered > seen.answered_at_first or known
        if seen.same >= TASK_FAILURE_REPEATS and seen.kind in ANSWERED_FAILURES and others:
            if task is not None:
                self.failed_tasks[task] = seen.message
            raise InfrastructureError(
                f"{self.name} server {self.url} failed this request the same way "
                f"{seen.same} times while answering others ({seen.message}): the task's own "
                "failure, not an outage",
                kind="task_failure",
            ) from error
        if seen.reply is not None and seen.same_reply >= REFUSAL_REPEATS:
            raise ServerRefusal(
                f"{self.name} server {self.url} refuses this request: it answered "
                f"{error} {seen.same_reply} times in a row to the same request. That is no "
                "outage; the run stops instead of waiting"
            ) from error

    def _failed(self, failure: Failure, idempotent: bool, error: Exception) -> None:
        self.ledger.count(self.name, failure.kind)
        if not idempotent and failure.kind != "connect":
            raise InfrastructureError(
                f"{self.name} server: {failure.message} on a request that may have been "
                "applied; the episode is abandoned and its task restarted",
                kind="episode_restart",
            ) from error

    def _wait(self, failure: Failure, waited_s: float, attempt: int) -> None:
        what = DESCRIBED[failure.kind]
        if waited_s >= self.budget_s:
            raise OutageError(
                f"{self.name} server {self.url} {what} for {waited_s:.0f} s, past the outage "
                f"budget of {self.budget_s:.0f} s (execution.outage_budget_s); last error: "
                f"{failure.message}",
                last_error=failure.message,
            )
        now = time.monotonic()
        with self._lock:
            report = now - self._last_report >= self.report_every_s
            terminal = now - self._last_terminal >= TERMINAL_EVERY_S
            self._last_report = now if report else self._last_report
            self._last_terminal = now if terminal else self._last_terminal
        said = (
            f"{self.name} server {self.url} {what} for {waited_s:.0f} s, waiting up to "
            f"{self.budget_s:.0f} s (execution.outage_budget_s; {failure.message})"
        )
        if report:
            log.warning(said)
        if terminal:
            also_to_terminal(said)
        delay = backoff_s(attempt + 1, self.base_delay_s, self.max_delay_s, failure.retry_after_s)
        self.ledger.stop.wait(min(delay, self.budget_s - waited_s + 0.05))
