"""Errors that reach the user: each names what is wrong and how to fix it."""

from __future__ import annotations


class SkillevalError(Exception):
    """Base class of every error meant for the user (printed without a traceback)."""


class ConfigError(SkillevalError):
    """A configuration value is invalid."""

    def __init__(self, file: str, key: str, value: object, problem: str, fix: str) -> None:
        self.file, self.key, self.value, self.problem, self.fix = file, key, value, problem, fix
        super().__init__(f"{file}: {key} = {value!r}: {problem}\n  fix: {fix}")


class RunLockedError(SkillevalError):
    """A second process tried to write a run that is being written."""


class CoverageError(SkillevalError):
    """A run could not reach the coverage its protocol requires."""


class ComparisonError(SkillevalError):
    """Two runs cannot be compared (different tasks, protocols, incomplete coverage)."""
