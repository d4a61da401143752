"""Paper sections whose floats follow the config (the ablation matrix's benchmarks and groups)."""

from __future__ import annotations

from collections.abc import Sequence

from skilleval.report.latex import environment
from skilleval.storage import atomic


def joined_refs(kind: str, labels: Sequence[str]) -> str:
    """One label: Table~\\ref{a}; two: Tables~\\ref{a} and~\\ref{b}; more: commas, then
    'and' before the last."""
    refs = [rf"\ref{{{label}}}" for label in labels]
    if len(refs) == 1:
        return f"{kind}~{refs[0]}"
    return f"{kind}s~{', '.join(refs[:-1])} and~{refs[-1]}"


def ablation_section(benchmarks: Sequence[str], groups: Sequence[str]) -> str:
    if not benchmarks or not groups:
        raise ValueError("the ablation section needs at least one benchmark and one group")
    return (
        environment()
        .get_template("ablation_section.tex.j2")
        .render(
            benchmarks=benchmarks,
            groups=groups,
            table_refs=joined_refs("Table", [f"tab:ablation-{b}" for b in benchmarks]),
        )
    )


def write_ablation_section(benchmarks: Sequence[str], groups: Sequence[str], output: str) -> None:
    atomic.write_text(output, ablation_section(benchmarks, groups))
