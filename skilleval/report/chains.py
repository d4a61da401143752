"""The records behind a number of a table, read from the records themselves.

A contrast's number comes from its verdict, its contrast record and its two runs (whose
names the contrast record holds); a run's from its summary. Each link says what a reader
needs to trust the number: a run's evidence identity (provenance.identity) in full, when
and from which commit each record was built, episodes computed and reused. The report's
front page shows these chains as built; `skilleval why` adds whether each is current now.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skilleval import paths

RECORD_FACTS = {
    "verdict": ("verdict", "estimate", "ci_low", "ci_high", "confidence", "p_value", "reason"),
    "contrast": (
        "metric", "estimate", "ci_low", "ci_high", "method", "n_pairs", "n_resamples", "seed",
        "control_fingerprint", "treatment_fingerprint",
    ),
}  # fmt: skip


TRAINER_FACTS = (
    "benchmark", "group", "value", "overrides", "trainer", "best_selection_score",
    "base_score", "best_test_score", "delta", "tokens", "plan_fingerprint",
)  # fmt: skip


@dataclass(frozen=True)
class Link:
    """One record behind the number: what it is, where, what it says and holds."""

    what: str
    path: str
    facts: dict[str, Any]
    built: dict[str, Any] = field(default_factory=dict)
    status: str = "as built"
    reasons: list[str] = field(default_factory=list)


def contrast_links(contrast: str, treatment: str, control: str) -> list[tuple[str, str]]:
    """(what, path) of the records behind a contrast: its verdict, its record, its runs
    (named by the plan, so an unbuilt contrast still names them)."""
    return [
        ("verdict", paths.fill(paths.VERDICT, contrast=contrast)),
        ("contrast", paths.fill(paths.CONTRAST, contrast=contrast)),
        run_link(treatment),
        run_link(control),
    ]


def run_link(run: str) -> tuple[str, str]:
    return (f"run {run}", paths.fill(paths.RUN_SUMMARY, run=run))


def facts(what: str, record: dict[str, Any], row: str, how: bool = True) -> dict[str, Any]:
    """What a reader needs of one record to trust the number above it; ``how``: also how
    the build went (episodes computed and reused), which differs build to build."""
    if what == "verdict family":
        member = next((m for m in record["members"] if m["name"] == row), None)
        return {"method": record["method"], "p_holm": member and member["p_holm"]}
    if what in RECORD_FACTS:
        return {k: record.get(k) for k in RECORD_FACTS[what]}
    if what == "gate betas":
        chunk: dict[str, Any] = next((c for c in record["chunks"] if c["chunk_id"] == row), {})
        return {"chunk": row, **chunk, "design": record["inputs"]["design_sha256"]}
    if what == "gate design":
        return {k: record.get(k) for k in ("seed", "inclusion_probability", "chunk_ids")}
    if what.startswith("trainer run"):
        return {k: record.get(k) for k in TRAINER_FACTS}
    if what == "audit":
        return {"valid": record.get("valid"), "reasons": record.get("reasons")}
    execution = record.get("provenance", {}).get("execution", {})
    built = {
        "episodes computed": execution.get("ran"),
        "episodes reused": execution.get("reused_from_journal"),
    }
    return {
        "identity": record["fingerprint"],
        "protocol": f"{record['protocol']}@{record['protocol_fingerprint'][:12]}",
        "checkpoint": f"{record['checkpoint_id']} ({record['checkpoint_fingerprint']})",
        "bank": f"{record['bank']} ({record['bank_hash']})" if record["bank"] else "none",
        "split": f"{record['split']} ({record['split_hash']})",
        "prompt": prompt_fact(record),
        "code": record["code_fingerprint"],
        "tasks": record["n_tasks"],
        **(built if how else {}),
    }


def prompt_fact(record: dict[str, Any]) -> str:
    """The run's prompt files by name, with the digest of their contents."""
    files = record["prompt_files"]
    named = " + ".join(str(v) for v in files.values()) if isinstance(files, dict) else files
    return f"{named} ({record['prompt_hash']})"


def read_chain(root: Path, links: list[tuple[str, str]], row: str, how: bool = True) -> list[Link]:
    """Each link read from its record as built; a link whose record is absent is missing.
    ``how``: with how each was built (see facts)."""
    found = []
    for what, path in links:
        if not (root / path).is_file():
            found.append(Link(what, path, {}, status="missing", reasons=["not built yet"]))
            continue
        record = json.loads((root / path).read_text())
        provenance = record.get("provenance", {})
        built = {"at": provenance.get("created_at"), **provenance.get("git", {})}
        found.append(Link(what, path, facts(what, record, row, how), built))
    return found


def chain_html(anchor: str, title: str, links: list[Link]) -> str:
    """A chain as a closed <details> block the table's row links to: what each record
    holds, not when it was built (provenance, which `skilleval why` prints), so two builds
    of the same evidence write the same page."""
    items = []
    for link in links:
        rows = "".join(
            f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
            for k, v in link.facts.items()
        )
        items.append(
            f"<li><b>{html.escape(link.what)}</b>: <code>{html.escape(link.path)}</code>"
            f"<table>{rows}</table></li>"
        )
    return (
        f'<details id="{html.escape(anchor)}"><summary>{html.escape(title)}</summary>'
        f"<ul>{''.join(items)}</ul></details>"
    )
