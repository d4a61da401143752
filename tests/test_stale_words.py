"""How `skilleval stale` words Snakemake's reasons, one layer below the staleness corpus
(tests/test_staleness.py): no Snakemake is started."""

from __future__ import annotations

from dataclasses import replace

from skilleval.workflow.stale import (
    NOT_BUILT,
    REBUILT,
    StaleJob,
    explain,
    report,
    root_causes,
)
from tests.stale_oracle import causes_by_cell

OUTPUTS = ("paper/tables/main.tex", "paper/tables/main.csv", "paper/tables/main_contrasts.csv")


def test_a_job_with_every_output_missing_is_not_built() -> None:
    reason = f"Missing output files: {', '.join(OUTPUTS)}"
    assert explain(reason, {}, "paper_main_table", OUTPUTS) == [NOT_BUILT]


def test_a_job_with_some_outputs_on_disk_is_stale_for_what_it_lacks() -> None:
    reason = "Missing output files: paper/tables/main_contrasts.csv"
    assert explain(reason, {}, "paper_main_table", OUTPUTS) == [
        "missing output: paper/tables/main_contrasts.csv"
    ]


def test_a_params_change_names_the_config_key() -> None:
    config = {"statistics": {"n_resamples": 2000, "method": "percentile"}}
    reason = (
        "Params have changed since last execution: before: "
        "{'n_resamples': 1000, 'method': 'percentile'} now: "
        "{'n_resamples': 2000, 'method': 'percentile'}"
    )
    assert explain(reason, config, "contrast") == ["statistics.n_resamples 1000 -> 2000"]


def test_the_report_says_each_cell_set_once_with_each_cause_once() -> None:
    run = StaleJob("eval_run", ("results/runs/base-S0/summary.json",), ("missing output: x",),
                   ("Table main, base-S0",))  # fmt: skip
    contrast = StaleJob("contrast", ("results/contrasts/s0-gain.json",),
                        (NOT_BUILT, "missing output: x"), ("Table main, s0-gain",))  # fmt: skip
    verdict = replace(contrast, rule="verdict", outputs=("results/verdicts/s0-gain.json",))
    said = report([run, contrast, verdict]).splitlines()
    assert said[:2] == [
        "Table main, base-S0: missing output: x",
        f"Table main, s0-gain: {NOT_BUILT}; missing output: x",
    ]
    assert said[2] == "3 stale job(s), 3 output(s)."
    assert causes_by_cell("\n".join(said))["Table main, s0-gain"] == [
        NOT_BUILT,
        "missing output: x",
    ]


def test_a_job_after_a_missing_input_is_not_called_unbuilt() -> None:
    """An archived run: its contrast is missing, the table beside it built. The table is
    stale for the run, not "not built"."""
    run = ("eval_run", ["results/runs/r/summary.json"], ["missing output: results/runs/r/x"])
    contrast = ("contrast", ["results/contrasts/c.json"],
                [NOT_BUILT, REBUILT + "results/runs/r/summary.json"])  # fmt: skip
    table = ("paper_main_table", ["paper/tables/main.tex"], [REBUILT + "results/contrasts/c.json"])
    leaf = ("world", ["results/world/w.json"], [NOT_BUILT])
    after_leaf = ("bank", ["results/banks/b.json"], [REBUILT + "results/world/w.json"])
    causes = root_causes([run, contrast, table, leaf, after_leaf])
    assert causes[2] == ["missing output: results/runs/r/x"]
    assert causes[4] == ["its input results/world/w.json is not built yet"]
