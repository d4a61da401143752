"""`skilleval why`'s chains and the report's linked rows, from the plan alone (no build)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from skilleval.errors import SkillevalError
from skilleval.report.cells import find_cell, gate_links
from skilleval.report.chains import read_chain
from skilleval.workflow.plan import WorkflowPlan, front_rows
from skilleval.workflow.why import chain
from tests.conftest import REPO, plan_of


@pytest.fixture(scope="module")
def plan() -> WorkflowPlan:
    return plan_of(yaml.safe_load((REPO / "config" / "config.yaml").read_text()))


# The main table as its one writer prints it (report/tables.py): markdown with the labels,
# a CSV per section with the ids, row for row. Numbers are made up; no record exists.
MAIN_MD = """## Runs

| Run | Skills | Reward |
|:---|:---|---:|
| base-free | none | 0.4979 |
| base-S0 | S0 | 0.5088 |

## Contrasts

| Contrast | Arms | Δreward | 95% CI | Verdict | p_Holm |
|:---|:---|---:|:---|:---|:---|
| s0-gain | base-S0 - base-free | +0.0108 | [-0.0296, +0.0508] | inconclusive | 0.675 |
"""
MAIN_CSV = "# units\nrun,reward\nbase-free,0.4979\nbase-S0,0.5088\n"
CONTRASTS_CSV = "# units\ncontrast,treatment,control\ns0-gain,base-S0,base-free\n"


@pytest.fixture()
def tables(tmp_path: Path) -> Path:
    folder = tmp_path / "paper" / "tables"
    folder.mkdir(parents=True)
    (folder / "main.md").write_text(MAIN_MD)
    (folder / "main.csv").write_text(MAIN_CSV)
    (folder / "main_contrasts.csv").write_text(CONTRASTS_CSV)
    return tmp_path


def test_a_cell_is_found_by_its_label_and_header(tables: Path) -> None:
    cell = find_cell(tables, "main", "S0-GAIN", "p_holm")
    assert (cell.section, cell.column, cell.value) == ("Contrasts", "p_Holm", "0.675")
    assert cell.ids == {"contrast": "s0-gain"}
    run = find_cell(tables, "main", "base-S0", "Reward")
    assert (run.value, run.ids, run.index) == ("0.5088", {"run": "base-S0"}, 1)


def test_an_unbuilt_contrast_still_names_its_runs(plan: WorkflowPlan, tables: Path) -> None:
    links = chain(plan, tables, find_cell(tables, "main", "s0-gain", "p_Holm"))
    assert [what for what, _ in links] == [
        "verdict family", "verdict", "contrast", "run base-S0", "run base-free",
    ]  # fmt: skip
    assert {link.status for link in read_chain(tables, links, "s0-gain")} == {"missing"}


def test_a_typo_in_a_table_row_or_column_names_the_choices(tables: Path) -> None:
    with pytest.raises(SkillevalError, match=r"no row 's0-gian' \(did you mean s0-gain"):
        find_cell(tables, "main", "s0-gian", None)
    with pytest.raises(SkillevalError, match="p_Holm"):
        find_cell(tables, "main", "s0-gain", "p_hlom")
    with pytest.raises(SkillevalError, match="did you mean main"):
        find_cell(tables, "mian", "s0-gain", None)
    with pytest.raises(SkillevalError, match=r"not built .*snakemake -j 4 paper/tables/ranking"):
        find_cell(tables, "ranking", "Top-4", None)


def test_the_report_links_every_ranking_row_to_a_contrast_with_its_runs(
    plan: WorkflowPlan,
) -> None:
    rows = front_rows(plan)
    ranking = {*plan.ranking_vs_free(), *plan.contrasts_for("ranking")}
    assert set(rows["ranking"].values()) == ranking
    assert rows["ranking"]["Top-4"] == "rank-top-vs-free"
    for contrast, (treatment, control) in rows["contrasts"].items():
        assert (treatment, control) == (
            plan.contrasts[contrast].treatment,
            plan.contrasts[contrast].control,
        )
    assert set(rows["main"]) == {*plan.contrasts_for("main"), *plan.main_runs}


def test_copies_of_a_table_from_two_builds_name_no_record(tables: Path) -> None:
    """The markdown shows the labels and the CSV holds the ids, row for row: a CSV with a
    row the markdown lacks would give a label another row's records."""
    csv = tables / "paper" / "tables" / "main.csv"
    csv.write_text(csv.read_text() + "final-ST,0.8862\n")
    with pytest.raises(SkillevalError, match=r"shows 2 rows under 'Runs' but .* holds 3"):
        find_cell(tables, "main", "base-S0", "Reward")


def test_an_unbuilt_gate_fit_is_a_missing_link(tables: Path) -> None:
    links = gate_links(tables, "draft16")
    assert links == [("gate betas", "results/gate/draft16/beta.json")]
    assert [link.status for link in read_chain(tables, links, "draft16-01")] == ["missing"]


RANKING_MD = """## Ranking arms

| Arm | Reward | Δ vs free | p_Holm |
|:---|---:|---:|---:|
| Bottom-4 | 0.4104 | -0.0875 | 0.001 |
| Top-4 | 0.5042 | +0.0062 | 0.772 |
"""


def test_a_ranking_arm_is_linked_by_its_run_not_its_row_position(
    plan: WorkflowPlan, tables: Path
) -> None:
    """Bottom-4 in the first row (a table laid out otherwise than the plan's order) still
    names rank-bottom-vs-free; an arm the config's paper has not names no record."""
    folder = tables / "paper" / "tables"
    (folder / "ranking.md").write_text(RANKING_MD)
    (folder / "ranking.csv").write_text("arm,reward\nrank-bottom-4,0.4104\nrank-top-4,0.5042\n")
    links = chain(plan, tables, find_cell(tables, "ranking", "Bottom-4", "p_Holm"))
    contrasts = [path for what, path in links if what == "contrast"]
    assert contrasts == ["results/contrasts/rank-bottom-vs-free.json"]
    assert [p for what, p in chain(plan, tables, find_cell(tables, "ranking", "Top-4", "Reward"))
            ] == ["results/runs/rank-top-4/summary.json"]  # fmt: skip
    (folder / "ranking.csv").write_text("arm,reward\nrank-other-4,0.4104\nrank-top-4,0.5042\n")
    with pytest.raises(SkillevalError, match=r"'rank-other-4', which is not an arm .*rebuild"):
        chain(plan, tables, find_cell(tables, "ranking", "Bottom-4", "p_Holm"))
