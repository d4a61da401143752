"""What the paper says about simulated evidence, derived from what answered.

Each run's summary records what served it (``simulated``: the sim policy in process, the
project's simulated world behind an OpenAI endpoint, or a real model server; each ablation
run, which trainer built it). The title page's notice and each table's caption, CSV
header comment and Markdown and HTML note are built from the summaries that table reads,
never from a config label, so a build whose endpoint is ``skilleval serve-world`` says so.
A summary that does not record it is named as unknown: no notice is a claim.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from skilleval.report.latex import latex_escape
from skilleval.storage import atomic

CAPTION = r" \emph{Simulated numbers (see the title page).}"


def _names(names: Sequence[str]) -> str:
    return ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")


def _part(kind: str, records: Mapping[str, Any], what: str) -> tuple[str, str]:
    """(simulated sentence, unknown sentence) for one kind of run."""
    simulated = [n for n, r in records.items() if r and r.get("simulated") is True]
    unknown = [n for n, r in records.items() if not r]
    silent = [n for n, r in records.items() if r and r.get("simulated") is None]
    said = ""
    if simulated:
        by = sorted({str(records[n]["by"]) for n in simulated})
        every = len(simulated) == len(records)
        whom = f"every {kind} number comes" if every else f"{kind} runs {_names(simulated)} come"
        said = f"{whom} from {what} (what answered: {'; '.join(by)})"
    missing = [
        f"{kind} runs {_names(unknown)} do not record what served them, so whether they are "
        "simulated is unknown (rebuild them)"
    ] * bool(unknown)
    if silent:
        by = sorted({str(records[n]["by"]) for n in silent})
        missing.append(
            f"whether {kind} runs {_names(silent)} are simulated is unknown: {'; '.join(by)}"
        )
    return said, "; ".join(missing)


def evidence_notice(
    evaluations: Mapping[str, Any],
    ablations: Mapping[str, Any],
    trusted: Mapping[str, str] | None = None,
) -> str:
    """The notice for evidence built from these runs: run name -> its summary's
    ``simulated`` record (None when it has none); ``trusted``: run -> what answered it, for
    runs whose server was trusted unchecked."""
    evaluation, unknown_evaluation = _part(
        "evaluation",
        evaluations,
        "the simulated shopping world and its scripted policy, so checkpoint names label "
        "simulated checkpoints, not real models",
    )
    ablation, unknown_ablation = _part("ablation", ablations, "the simulated trainer")
    parts = [p for p in (evaluation, ablation) if p]
    unknown = [p for p in (unknown_evaluation, unknown_ablation) if p]
    sentences = []
    if parts:
        sentences.append("Simulated evidence: " + "; ".join(parts) + ".")
    if unknown:
        sentences.append("Unknown: " + "; ".join(unknown) + ".")
    if trusted:
        answered = "; ".join(sorted({f"{what}" for what in trusted.values()}))
        sentences.append(
            f"Unchecked servers: runs {_names(list(trusted))} were answered by {answered}, "
            "trusted without an identity check (model_server.identity: trust): the weights "
            "that served were not checked against the registered checkpoint, nor its "
            "sampling defaults against the protocol."
        )
    return " ".join(sentences)


def _read(path: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(Path(path).read_text())
    return data


def notice_of(run_summaries: Sequence[str] = (), ablation_summaries: Sequence[str] = ()) -> str:
    """The notice of evidence read from these summary files."""
    runs = {s["run"]: s for s in map(_read, run_summaries)}
    ablations = {s["run_id"]: s for s in map(_read, ablation_summaries)}
    trusted = {
        n: answered_by(s["service"].get("answered") or {})
        for n, s in runs.items()
        if s.get("service", {}).get("identity_check") == "trusted"
    }
    return evidence_notice(
        {n: s.get("simulated") for n, s in runs.items()},
        {n: s.get("simulated") for n, s in ablations.items()},
        trusted,
    )


def answered_by(answered: Mapping[str, Any]) -> str:
    """What a run's server reported serving, in words."""
    model = answered.get("model") or "a model it did not name"
    engine = answered.get("engine_reported") or answered.get("engine") or "an unidentified engine"
    version = f" {answered['engine_version']}" if answered.get("engine_version") else ""
    return f"{model} on {engine}{version}"


def caption_of(notice: str) -> str:
    """What a table's or figure's LaTeX caption adds for its evidence."""
    return CAPTION if "Simulated evidence" in notice else ""


def write_notice(notice: str, output: str, text_output: str | None = None) -> None:
    """The macros the paper's title page and figure captions use to say what is
    simulated; ``text_output`` keeps the plain sentence for the report's first view."""
    atomic.write_text(
        output,
        "% Generated by skilleval (rule paper_notice); do not edit by hand.\n"
        f"\\newcommand{{\\simulationnotice}}{{{latex_escape(notice)}}}\n"
        f"\\newcommand{{\\simulatedcaption}}{{{caption_of(notice)}}}\n",
    )
    if text_output is not None:
        atomic.write_text(text_output, notice + "\n")
