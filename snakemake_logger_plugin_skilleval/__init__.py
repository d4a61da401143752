"""Snakemake's logger plugin ``skilleval`` (``--logger skilleval``; profiles/default sets
it): one line per finished job with the time left, and in a dry run the planned jobs as
JSON lines (skilleval.progress.handler)."""

# No ``from __future__ import annotations`` here: Snakemake builds the setting's command
# line option from the field's type object.
from dataclasses import dataclass, field
from typing import Optional

from snakemake_interface_logger_plugins.settings import LogHandlerSettingsBase

from skilleval.progress.handler import BuildProgressHandler as LogHandler


@dataclass
class LogHandlerSettings(LogHandlerSettingsBase):
    """``--logger-skilleval-plan-file PATH``: where a dry run writes its planned jobs."""

    plan_file: Optional[str] = field(  # noqa: UP045 (a type object, see above)
        default=None,
        metadata={"help": "In a dry run, write each planned job to this file as a JSON line."},
    )


__all__ = ["LogHandler", "LogHandlerSettings"]
