"""`skilleval why`'s chains and the report's linked rows, from the plan alone (no build)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from skilleval.errors import SkillevalError
from skilleval.report.chains import read_chain
from skilleval.workflow.plan import WorkflowPlan, front_rows
from skilleval.workflow.why import chain
from tests.conftest import REPO, plan_of


@pytest.fixture(scope="module")
def plan() -> WorkflowPlan:
    return plan_of(yaml.safe_load((REPO / "config" / "config.yaml").read_text()))


def test_an_unbuilt_contrast_still_names_its_runs(plan: WorkflowPlan, tmp_path: Path) -> None:
    links = chain(plan, tmp_path, "main", "s0-gain", "p_Holm")
    assert [what for what, _ in links] == [
        "verdict family", "verdict", "contrast", "run base-S0", "run base-free",
    ]  # fmt: skip
    assert {link.status for link in read_chain(tmp_path, links, "s0-gain")} == {"missing"}
    ranking = chain(plan, tmp_path, "ranking", "rank-top-vs-free", None)
    assert ranking[2:] == [
        ("run rank-top-4", "results/runs/rank-top-4/summary.json"),
        ("run base-free", "results/runs/base-free/summary.json"),
    ]


def test_a_typo_in_a_row_or_column_names_the_choices(plan: WorkflowPlan, tmp_path: Path) -> None:
    with pytest.raises(SkillevalError, match=r"no row 's0-gian' \(did you mean s0-gain\?\)"):
        chain(plan, tmp_path, "main", "s0-gian", None)
    with pytest.raises(SkillevalError, match="p_holm"):
        chain(plan, tmp_path, "main", "s0-gain", "p_hlom")


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
