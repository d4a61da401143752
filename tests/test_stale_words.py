"""How `skilleval stale` words Snakemake's reasons, one layer below the staleness corpus
(tests/test_staleness.py): no Snakemake is started."""

from __future__ import annotations

from skilleval.workflow.stale import explain

OUTPUTS = ("paper/tables/main.tex", "paper/tables/main.csv", "paper/tables/main_contrasts.csv")


def test_a_job_with_every_output_missing_is_not_built() -> None:
    reason = f"Missing output files: {', '.join(OUTPUTS)}"
    assert explain(reason, {}, "paper_main_table", OUTPUTS) == [
        "not built yet (or removed/archived)"
    ]


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
