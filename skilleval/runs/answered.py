"""One model answers a run: each episode is stamped with what answered it, and an episode
answered by another model than the journal's stops the run before it is recorded.

What the server states is its identity (serving.answerer), read at the run's start, after
every reconnect and at its end; what each reply states is its ``model`` field. A hosted
API names a dated model in every reply, so a run that sees a second one mid-run stops
too. A journal line written before episodes were stamped holds no stamp: it is named in
the run log and in the summary (``episodes_unstamped``), never taken for a match.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from skilleval.env.rollout import EpisodeResult
from skilleval.errors import AnswererChanged
from skilleval.serving.answerer import LAUNCHED_NAME, Answerer, refuse_change

log = logging.getLogger(__name__)


class AnswerGate:
    """Stamps each episode of ``run`` with ``answerer`` and the models its replies named,
    refusing a journal or an episode answered by another. ``launched_name``: the name the
    run's launcher gave its server, which replies echo; it names the lease, an address,
    so it is stamped as LAUNCHED_NAME."""

    def __init__(
        self,
        run: str,
        answerer: Answerer,
        journaled: Iterable[Mapping[str, Any]],
        launched_name: str | None = None,
    ) -> None:
        self.run, self.answerer, self.launched_name = run, answerer, launched_name
        self.reply_models: dict[str, str] = {}  # model a reply named -> the task that did
        self._lock = threading.Lock()
        unstamped = 0
        for record in journaled:
            stamp = record.get("answered")
            if stamp is None:
                unstamped += 1
                continue
            refuse_change(run, stamp, answerer, "resumed,")
            self._note_replies(stamp["reply_models"], str(record["task_id"]))
        self.unstamped = unstamped
        if unstamped:
            log.warning(
                "run %s: %d journaled episodes were written before episodes were stamped with "
                "what answered them; the summary counts them as episodes_unstamped",
                run,
                unstamped,
            )

    def stamp(self, ended: EpisodeResult) -> EpisodeResult:
        """``ended`` with what answered it; AnswererChanged where a reply named a model no
        reply of the run named before."""
        models = tuple(
            LAUNCHED_NAME if model == self.launched_name else model for model in ended.reply_models
        )
        with self._lock:
            self._note_replies(models, ended.task_id)
        return dataclasses.replace(ended, answered=self.answerer.stamp(models))

    def _note_replies(self, models: Iterable[str], task_id: str) -> None:
        for model in models:
            earlier = next(iter(self.reply_models.items()), None)
            if earlier is not None and model not in self.reply_models:
                raise AnswererChanged(
                    f"run {self.run!r}: a reply of task {task_id} names model {model!r}, but "
                    f"the run's replies named {earlier[0]!r} (task {earlier[1]}); episodes of "
                    "two models are never combined. Fix: pin model_server.model to a dated "
                    f"model id, or move the run's episodes aside with skilleval clean "
                    f"{self.run} --archive and build it again"
                )
            self.reply_models.setdefault(model, task_id)


def answered_summary(records: list[dict[str, Any]], gate: AnswerGate) -> dict[str, Any]:
    """How many of the run's episodes each identity answered, and the reply models seen."""
    identities = Counter(
        str(r["answered"]["identity"]) for r in records if r.get("answered") is not None
    )
    return {
        "episodes_by_identity": dict(identities),
        "episodes_unstamped": sum(r.get("answered") is None for r in records),
        "reply_models": sorted(gate.reply_models),
    }
