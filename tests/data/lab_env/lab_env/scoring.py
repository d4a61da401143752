"""How the lab's server grades an episode, mapped onto skilleval's metrics: a module of its
own, so that the adapter's identity is shown to cover every module of its package."""

from __future__ import annotations

from typing import Any

# The server's grades are shares already; a lab whose server scores in points 0-100 sets
# 100 here.
POINTS_PER_SHARE = 1.0


def rewards_of(grades: dict[str, Any]) -> dict[str, float]:
    """The episode's metrics from the server's grades."""
    return {key: float(value) / POINTS_PER_SHARE for key, value in grades.items()}
