"""How long earlier runs took, from the summaries they wrote.

Kept light (json and datetime only): the workflow reads it while it is parsed, to size a
run's cluster job (serving.sizing), and ``skilleval stale`` to price planned runs.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path


def last_wall_s(summary: Path) -> float | None:
    """The wall time an earlier summary recorded: an evaluation run's execution time, a
    trainer run's start to finish; None when there is no such summary."""
    if not summary.exists():
        return None
    try:
        record = json.loads(summary.read_text())
    except (OSError, ValueError):
        return None
    provenance = record.get("provenance") or {}
    wall = (provenance.get("execution") or {}).get("wall_s")
    if wall is not None:
        return float(wall)
    started, finished = provenance.get("started_at"), provenance.get("finished_at")
    if started and finished:
        return (
            dt.datetime.fromisoformat(finished) - dt.datetime.fromisoformat(started)
        ).total_seconds()
    return None
