"""Errors that reach the user: each names what is wrong and how to fix it."""

from __future__ import annotations


class SkillevalError(Exception):
    """Base class of every error meant for the user (printed without a traceback)."""


def locate(source: object, key: str) -> str:
    """Where a key's value is set: ``source.where(key)`` (file and line, for merged config
    files), else the source itself as a file name."""
    where = getattr(source, "where", None)
    return str(where(key)) if callable(where) else str(source)


class ConfigError(SkillevalError):
    """A configuration value is invalid.

    ``source`` is a file name, or an object whose ``where(key)`` names the file and line
    that set the key (config.loading.ConfigSources, for merged overlays).
    """

    def __init__(self, source: object, key: str, value: object, problem: str, fix: str) -> None:
        self.file = locate(source, key)
        self.key, self.value, self.problem, self.fix = key, value, problem, fix
        super().__init__(f"{self.file}: {key} = {value!r}: {problem}\n  fix: {fix}")


class ConfigErrors(ConfigError):
    """Several invalid values, reported together; its key, value and fix are the first's."""

    def __init__(self, errors: list[ConfigError], most: int) -> None:
        first = errors[0]
        self.errors = errors
        self.file, self.key, self.value = first.file, first.key, first.value
        self.problem, self.fix = first.problem, first.fix
        shown = [str(e) for e in errors[:most]]
        if len(errors) > most:
            shown.append(f"... and {len(errors) - most} more")
        SkillevalError.__init__(self, f"{len(errors)} invalid values:\n" + "\n".join(shown))


class YamlSyntaxError(ConfigError):
    """A YAML file that does not parse, with the line and column where it breaks."""

    def __init__(
        self, file: str, line: int, column: int, source_line: str, problem: str, fix: str
    ) -> None:
        SkillevalError.__init__(
            self,
            f"{file}, line {line}, column {column}: YAML syntax error: {problem}\n"
            f"  {source_line}\n  {' ' * max(column - 1, 0)}^\n  fix: {fix}",
        )
        self.file, self.key, self.value = f"{file}, line {line}", "(YAML syntax)", source_line
        self.problem, self.fix = problem, fix


class RunLockedError(SkillevalError):
    """A second process tried to write a run that is being written."""


class CoverageError(SkillevalError):
    """A run could not reach the coverage its protocol requires."""


class ComparisonError(SkillevalError):
    """Two runs cannot be compared (different tasks, protocols, incomplete coverage)."""


class InfrastructureError(Exception):
    """A failure of the machinery (timeout, 429, 5xx, lost slot), never a task failure.

    Episodes that raise it are restarted from a fresh episode and never scored; ``kind``
    names the failure in the run's retry counts.
    """

    def __init__(
        self, message: str, retry_after_s: float | None = None, kind: str = "infrastructure"
    ) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
        self.kind = kind


class RejectedRequest(Exception):
    """The model server refused one request (a 4xx other than 429): the model's failure on
    that task, never a reason to stop the run. ``reason`` is context_overflow or
    rejected_request."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class OutageError(SkillevalError):
    """A server stayed unreachable or failing for longer than the run's outage budget;
    ``last_error``: the last failure it gave."""

    def __init__(self, message: str, last_error: str = "") -> None:
        super().__init__(message)
        self.last_error = last_error


class ServerRefusal(SkillevalError):
    """The server refuses the run's requests for what they are, not for a passing fault: a
    key it does not take, a base URL it does not serve, a request body it will not accept
    however often it is sent. No wait cures it, so the run stops at once with the server's
    own words; the journal keeps every finished episode."""


class ContractBreach(SkillevalError):
    """What an environment adapter handed over breaks its contract (skilleval/env/contract.py):
    no retry cures it, so the run stops at once; the journal keeps every episode recorded
    before it."""


class DiskError(SkillevalError):
    """A result or journal could not be written: disk full, read-only or not permitted."""


class CheckpointError(SkillevalError):
    """A checkpoint file is missing, unreadable or not what the registry says."""


class BankError(SkillevalError):
    """A skill bank file is malformed or does not match its registry entry."""


class ServiceError(SkillevalError):
    """The model service is not the one the protocol and checkpoint require."""


class GpuLeaseError(SkillevalError):
    """No lease could be granted (asked for too many cards, or none came free in time)."""


class RecordVersionError(SkillevalError):
    """A result file was written in a format this version of skilleval does not read."""


class AnswererChanged(ServiceError):
    """The model that answers a run is not the one that answered its episodes so far (a
    resumed journal, a server restarted on other weights): the run stops rather than
    combine two models' episodes; the journal keeps every episode."""


class FigureError(SkillevalError):
    """A figure draws text past its own edges: the PDF would print it cut."""
