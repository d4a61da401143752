"""How the lab's server grades an episode, mapped onto skilleval's metrics: a module of its
own, so that the adapter's identity is shown to cover every module of its package, with
its scale from the distribution's other package (lab_grading)."""

from __future__ import annotations

from typing import Any

from lab_grading import POINTS_PER_SHARE


def rewards_of(grades: dict[str, Any]) -> dict[str, float]:
    """The episode's metrics from the server's grades."""
    return {key: float(value) / POINTS_PER_SHARE for key, value in grades.items()}
