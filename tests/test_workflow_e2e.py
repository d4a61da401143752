"""The whole graph on a small world: build, no-op, staleness after changes, resume."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import dry_run_outputs, read_jsonl, skilleval_cli, snakemake, unfrozen
from tests.stale_oracle import causes_by_cell

pytestmark = pytest.mark.slow

RUNS = ("base-free", "base-S0", "final-free", "final-ST")
CONTRASTS = ("s0-gain", "internalisation", "internalisation-gap", "upper-bound", "final-vs-initial")


def small(workdir: Path, *targets: str, extra_config: str | None = None) -> dict[str, set[str]]:
    configs = ["config/small.yaml", *([extra_config] if extra_config else [])]
    return dry_run_outputs(workdir, *targets, "--configfile", *configs)


def test_paper_builds_all_runs_contrasts_and_table(built: Path) -> None:
    for run in RUNS:
        summary = json.loads((built / "results" / "runs" / run / "summary.json").read_text())
        assert summary["coverage"] == 1.0 and summary["n_tasks"] == 48
    for name in CONTRASTS:
        verdict = json.loads((built / "results" / "verdicts" / f"{name}.json").read_text())
        assert verdict["verdict"] in {"improves", "regresses", "inconclusive", "descriptive"}
    final_vs_initial = json.loads((built / "results/verdicts/final-vs-initial.json").read_text())
    assert final_vs_initial["verdict"] == "descriptive"
    table = (built / "paper" / "tables" / "main.tex").read_text()
    assert r"\toprule" in table and "[" in table
    assert "shop-assistant.system.txt + skills.j2 (" in table  # the registered prompt files
    for name in (*RUNS, *CONTRASTS):
        assert name in table
    assert (built / "paper" / "figures" / "contrasts.png").stat().st_size > 1000
    assert (built / "paper" / "tables" / "main.csv").exists()


def test_nothing_is_stale_after_a_build(built: Path) -> None:
    assert small(built, "paper") == {}


def test_changing_st_bank_makes_only_st_dependents_stale(built: Path) -> None:
    bank = built / "results" / "world" / "banks" / "ST.md"
    original = bank.read_text()
    bank.write_text(original.replace("## chunk st-01\n", "## chunk st-01\n\nEdited by hand.\n"))
    try:
        jobs = small(built, "paper")
    finally:
        bank.write_text(original)
        snakemake(built, "paper", "--touch", "--configfile", "config/small.yaml")
    assert jobs["eval_run"] == {
        "results/runs/final-ST/results.jsonl",
        "results/runs/final-ST/summary.json",
        "results/runs/final-ST/transcripts.jsonl.gz",
    }
    stale_contrasts = {Path(o).stem for o in jobs["contrast"]}
    assert stale_contrasts == {"internalisation-gap", "upper-bound", "final-vs-initial"}
    assert "world_tasks" not in jobs and "world_checkpoint" not in jobs
    assert "gate_masked_run" not in jobs and "paper_ranking_table" not in jobs
    assert jobs["paper_verdict_family"] == {"results/paper/verdict_family_main.json"}


def test_changing_one_draft_chunk_makes_ranking_stale_not_main_table(built: Path) -> None:
    bank = built / "results" / "world" / "banks" / "draft16.md"
    original = bank.read_text()
    bank.write_text(original.replace("## chunk draft16-07\n", "## chunk draft16-07\n\nEdited.\n"))
    try:
        jobs = small(built, "paper")
    finally:
        bank.write_text(original)
        snakemake(built, "paper", "--touch", "--configfile", "config/small.yaml")
    assert {"gate_beta", "freeze_bank", "paper_ranking_table", "paper_beta_plot"} <= set(jobs)
    assert len(jobs["gate_masked_run"]) == 3 * 12  # results, summary, transcripts
    stale_runs = {Path(o).parent.name for o in jobs["eval_run"]}
    assert stale_runs == {"rank-top-4", "rank-bottom-4", "rank-random-4-20260907"}
    assert "paper_main_table" not in jobs and "paper_forest_plot" not in jobs
    assert jobs["paper_verdict_family"] == {"results/paper/verdict_family_ranking.json"}
    assert all(Path(o).stem.startswith("rank-") for o in jobs["contrast"])


def test_bare_runs_are_built_once_from_scratch(built: Path) -> None:
    jobs = small(built, "paper", "--forceall")
    runs = sorted(Path(o).parent.name for o in jobs["eval_run"] if o.endswith("summary.json"))
    assert runs.count("base-val-free") == 1 and runs.count("base-free") == 1
    assert len(jobs["gate_masked_run"]) == 3 * 12  # results, summary, transcripts


def test_gate_recovers_signs_in_small_world(built: Path) -> None:
    check = json.loads((built / "results" / "gate" / "draft16" / "truth_check.json").read_text())
    assert check["decisive_signs_right"] == check["decisive_chunks"]
    assert -1 <= check["spearman_beta_vs_truth"] <= 1
    top = json.loads((built / "results" / "banks" / "draft16" / "top-4.json").read_text())
    beta = json.loads((built / "results" / "gate" / "draft16" / "beta.json").read_text())
    assert top["chunk_ids"] == beta["signed_order"][:4]


def test_changing_a_protocol_value_makes_every_run_stale(built: Path) -> None:
    override = built / "config" / "hotter.yaml"
    override.write_text("protocols:\n  local-sglang:\n    sampling:\n      temperature: 0.7\n")
    with unfrozen(built):
        jobs = small(built, "paper", extra_config="config/hotter.yaml")
    runs = {Path(o).parent.name for o in jobs["eval_run"]}
    assert set(RUNS) <= runs
    assert "world_tasks" not in jobs


def test_ablation_matrix_builds_with_audits_and_marked_invalid_runs(built: Path) -> None:
    audits = {
        p.stem: json.loads(p.read_text())
        for p in (built / "results" / "audit" / "ablation").glob("*/*.json")
    }
    assert len(audits) == 216
    invalid = {
        k: [c["name"] for c in v["checks"] if not c["passed"]]
        for k, v in audits.items()
        if not v["valid"]
    }
    assert invalid == {
        "LR-docvqa-8": ["only_declared_keys_differ"],
        "MBS-alfworld-2": ["no_rate_limit_errors"],
        "SLOWN-livemathematicianbench-5": ["no_crash"],
    }
    table = (built / "paper" / "tables" / "ablation_docvqa.tex").read_text()
    assert r"8$^\dagger$" in table and "only\\_declared\\_keys\\_differ" in table
    harness = (built / "paper" / "tables" / "harness.csv").read_text()
    assert harness.startswith("# Simulated evidence: every ablation number")  # its notice
    assert harness.count("\n") == 3 + 1 + 18 + 66  # notice, caption, units, header, rows
    import pandas as pd

    numbers = pd.read_csv(built / "paper" / "tables" / "harness.csv", comment="#")
    assert numbers["Codex_test"].dtype.kind == "f" and numbers["Claude_valid"].notna().any()
    for group in ("batch", "lr", "lrctrl"):
        assert (built / "paper" / "figures" / f"ablation_{group}.png").exists()


def test_ablation_plan_command_reports_statuses(built: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "skilleval.cli",
            "ablation",
            "plan",
            "--json",
            "--root",
            str(built),
            "--matrix",
            str(built / "config" / "ablation" / "planted.yaml"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = json.loads(done.stdout)
    statuses = {r["id"]: r["status"] for r in rows}
    assert statuses["LR-docvqa-8"] == "invalid" and statuses["BATCH-docvqa-full"] == "done"
    assert {r["section"] for r in rows} == {
        "prior",
        "3.1",
        "3.2",
        "3.4",
        "3.5",
        "harness-1",
        "harness-2",
        "harness-3",
    }


def test_stale_report_names_exactly_the_affected_cells(built: Path) -> None:
    def stale(*configs: str) -> tuple[int, set[str]]:
        args = [
            a
            for c in ("config/config.yaml", "config/small.yaml", *configs)
            for a in ("--configfile", c)
        ]
        done = subprocess.run(
            [sys.executable, "-m", "skilleval.cli", "stale", "--root", str(built), *args],
            capture_output=True,
            text=True,
        )
        return done.returncode, causes_by_cell(done.stdout) if done.returncode else {}

    assert stale() == (0, {}), stale()
    (built / "config" / "hotter.yaml").write_text(
        "protocols:\n  local-sglang:\n    sampling:\n      temperature: 0.7\n"
    )
    bank = built / "results" / "world" / "banks" / "ST.md"
    original = bank.read_text()
    bank.write_text(original.replace("## chunk st-03\n", "## chunk st-03\n\nEdited.\n"))
    try:
        with unfrozen(built):
            code, causes = stale("config/hotter.yaml")
    finally:
        bank.write_text(original)
        snakemake(built, "paper", "--touch", "--configfile", "config/small.yaml")
    assert code == 1
    bank_edit = "input changed: results/world/banks/ST.md (chunks st-03)"
    assert bank_edit in causes["Table main, final-ST"]
    assert "protocol.sampling.temperature 0.6 -> 0.7" in causes["Table main, base-free"]
    cells = set(causes)
    expected_main = {f"Table main, {r}" for r in RUNS} | {f"Table main, {c}" for c in CONTRASTS}
    assert expected_main <= cells
    assert "Table ranking, every arm (gate betas)" in cells
    assert not any(c.startswith("Table ablation") for c in cells)


def test_every_json_artifact_carries_its_format_version(built: Path) -> None:
    """Files an ablation run's trainer writes in its out_root, and a checkpoint's own
    config.json, keep the formats of the real trainer and model; the rest are records."""
    unversioned = []
    for path in (built / "results").rglob("*.json*"):
        relative = path.relative_to(built / "results")
        trainer_owned = relative.parts[0] == "ablation" and relative.parts[1] != "splits"
        model_owned = relative.parts[:2] == ("world", "checkpoints")
        if (trainer_owned and path.name != "summary.json") or model_owned:
            continue
        text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else None
        text = path.read_text() if text is None else text
        lines = text.splitlines() if ".jsonl" in path.suffixes else [text]
        records = [json.loads(line) for line in lines if line.strip()]
        if not all(isinstance(r, dict) and "format_version" in r for r in records):
            unversioned.append(str(relative))
    assert unversioned == [], unversioned[:10]


def holm_by_hand(p: dict[str, float]) -> dict[str, float]:
    """Holm's step-down, written out (not statsmodels, which the workflow uses)."""
    order = sorted(p, key=p.__getitem__)
    running, adjusted = 0.0, {}
    for i, name in enumerate(order):
        running = max(running, min(1.0, (len(order) - i) * p[name]))
        adjusted[name] = running
    return adjusted


def test_the_holm_column_is_recomputed_from_the_verdicts(built: Path) -> None:
    verdicts = {
        p.stem: json.loads(p.read_text()) for p in (built / "results" / "verdicts").glob("*.json")
    }
    ranking = ["rank-top-vs-free", "rank-random-vs-free", "rank-bottom-vs-free"]
    ranking += ["rank-top-vs-bottom", "rank-top-vs-random", "rank-random-vs-bottom"]
    for table, shown in (("main", CONTRASTS), ("ranking", ranking)):
        path = built / "results" / "paper" / f"verdict_family_{table}.json"
        members = {m["name"]: m for m in json.loads(path.read_text())["members"]}
        # The family: every causal contrast the table shows, and no other.
        causal = {n for n in shown if verdicts[n]["verdict"] not in ("descriptive", "invalid")}
        assert set(members) == causal and "final-vs-initial" not in members
        expected = holm_by_hand({n: verdicts[n]["p_value"] for n in causal})
        for name, member in members.items():
            assert member["p_holm"] == pytest.approx(expected[name], abs=1e-12)
        assert r"p_\mathrm{Holm}" in (built / "paper" / "tables" / f"{table}.tex").read_text()
    contrasts = (built / "paper" / "tables" / "main_contrasts.csv").read_text().splitlines()
    header = contrasts[3].split(",")  # under the notice's, the caption's and the units' lines
    assert "p_holm" in header


def test_the_main_table_csvs_are_numbers_a_reader_loads(built: Path) -> None:
    import pandas as pd

    tables = built / "paper" / "tables"
    contrasts = pd.read_csv(tables / "main_contrasts.csv", comment="#")
    for column in ("estimate", "ci_low", "ci_high", "confidence", "p_value", "p_holm"):
        assert contrasts[column].dtype == float, column
    verdicts = {p.stem: json.loads(p.read_text()) for p in (built / "results/verdicts").glob("*")}
    for row in contrasts.itertuples():
        verdict = verdicts[row.contrast]
        assert (row.estimate, row.ci_low, row.ci_high) == pytest.approx(
            (verdict["estimate"], verdict["ci_low"], verdict["ci_high"])
        )
        # The LaTeX prints the same numbers, rounded: estimate and interval alike.
        tex = (tables / "main.tex").read_text()
        # The estimate in a decimal-aligned column (no dollars), the interval as text.
        assert f"& {row.estimate:+.4f} &" in tex and f"${row.ci_low:+.4f}$" in tex
    runs = pd.read_csv(tables / "main.csv", comment="#")
    for column in ("reward", "r_success", "coverage", "tokens_per_task"):
        assert runs[column].dtype == float, column
    # Every auxiliary metric the protocol declares, each run's mean from its summary.
    for metric in ("r_strict", "r_category", "r_budget", "r_attrs"):
        assert runs[metric].dtype == float, metric
        for row in runs.itertuples():
            summary = json.loads((built / f"results/runs/{row.run}/summary.json").read_text())
            assert getattr(row, metric) == pytest.approx(summary[metric]), (row.run, metric)
    markdown_header = (tables / "main.md").read_text().split("## Runs")[1].splitlines()[4]
    assert "| r_success | r_attrs | r_budget | r_category | r_strict |" in markdown_header
    markdown, tex = (tables / "main.md").read_text(), (tables / "main.tex").read_text()
    assert "<0.001" not in tex  # OT1 would print it as "¡0.001"
    assert ("\\textless{}0.001" in tex) == ("<0.001" in markdown)
    assert "tab:" not in markdown and "\u2212" not in markdown


def test_the_gate_keeps_the_intercept_fit_beside_the_memo_s(built: Path) -> None:
    gate = built / "results" / "gate" / "draft16"
    beta = json.loads((gate / "beta.json").read_text())
    assert beta["diagnostics"]["intercept"] is False
    assert beta["intercept_fit"]["diagnostics"]["intercept"] is True
    assert "beta" in beta["intercept_fit"]["intercept"]
    memo = {c["chunk_id"]: c["beta"] for c in beta["chunks"]}
    rows = {r["chunk_id"]: r for r in beta["comparison"]["chunks"]}
    assert set(rows) == set(memo)
    for chunk, row in rows.items():
        assert row["beta_memo"] == memo[chunk]
        assert row["sign_differs"] == ((row["beta_memo"] > 0) != (row["beta_intercept_fit"] > 0))
    check = json.loads((gate / "truth_check.json").read_text())
    assert 0 <= check["intercept_fit"]["covered"] <= len(memo)
    assert check["true_common_effect"] == 0.0  # the default world has no common effect
    top = json.loads((built / "results" / "banks" / "draft16" / "top-4.json").read_text())
    assert {"estimate", "ci_low", "ci_high"} <= set(top["predicted_effect_intercept_fit"])
    tex = (built / "paper" / "tables" / "ranking.tex").read_text()
    assert r"\label{tab:betas}" in tex and "With an intercept" in tex


def test_a_registered_random_bank_is_used_as_listed(built: Path, tmp_path: Path) -> None:
    """A Random-4 bank drawn elsewhere, registered by its ids: the frozen bank and the run
    use exactly those chunks, and the ranking table says it was registered."""
    import shutil

    workdir = tmp_path / "paper"
    shutil.copytree(built, workdir, symlinks=True)
    drawn = json.loads((workdir / "results/banks/draft16/random-4-20260907.json").read_text())
    listed = ["draft16-01", "draft16-05", "draft16-09", "draft16-13"]
    assert sorted(drawn["chunk_ids"]) != listed
    entry = {"seed": 20260907, "chunk_ids": listed, "drawn_by": "lab script", "note": "memo"}
    overlay = workdir / "config" / "registered.yaml"
    overlay.write_text(json.dumps({"ranking": {"registered_random_banks": [entry]}}))
    configs = ["config/small.yaml", "config/registered.yaml"]
    snakemake(workdir, "-j", "2", "paper/tables/ranking.csv", "--configfile", *configs)
    frozen = json.loads((workdir / "results/banks/draft16/random-4-20260907.json").read_text())
    assert frozen["chunk_ids"] == listed and frozen["registered"]["drawn_by"] == "lab script"
    summary = json.loads((workdir / "results/runs/rank-random-4-20260907/summary.json").read_text())
    assert sorted(summary["chunk_hashes"]) == listed
    table = (workdir / "paper" / "tables" / "ranking.tex").read_text()
    assert "seed 20260907, registered" in table


LEVEL_COLUMNS = {"Reward", "r_success", "Coverage", "SE", "SE (intercept fit)", "p_Holm",
                 "Best sel.", "Base", "Best test", "Codex", "Claude"}  # fmt: skip


# The tables whose CSVs hold their numbers, one column each (for a reader's pandas).
DATA_CSVS = {"main", "main_contrasts", "ranking", "ranking_contrasts", "ranking_betas"}


def test_every_table_copy_reads_like_the_pdf(built: Path) -> None:
    """CSV copies of every paper table: the LaTeX's columns, rounding and signs, no nan,
    integers as integers, one table per CSV, a caption on each; a table given as data
    holds numbers pandas reads as numbers, under its notice, caption and units."""
    import csv

    import pandas as pd

    from skilleval.report.latex import plain_text

    tables = built / "paper" / "tables"
    copies = sorted(p for p in tables.glob("*.csv"))
    assert {p.stem for p in copies} >= {"main", "main_contrasts", "ranking", "ranking_betas",
                                        "harness", "ablation_docvqa"}  # fmt: skip
    for path in copies:
        table = path.stem.removesuffix("_contrasts").removesuffix("_betas")
        tex = plain_text((tables / f"{table}.tex").read_text())
        lines = path.read_text().splitlines()
        comments = [line for line in lines if line.startswith("# ")]
        if path.stem in DATA_CSVS or path.stem == "harness" or path.stem.startswith("ablation_"):
            assert len(comments) == 3 and ": " in comments[1], path  # notice, caption, units
            numbers = pd.read_csv(path, comment="#").select_dtypes("number")
            assert numbers.shape[1] >= 3, (path, list(numbers))
            continue
        assert len(comments) == 2 and ": " in comments[1], path  # notice, then the caption
        rows = list(csv.reader(line for line in lines if not line.startswith("# ")))
        header, body = rows[0], rows[1:]
        assert body and all(len(r) == len(header) for r in body), path  # one table
        for column in header[:-1]:  # the last is the copies' Note (the LaTeX's table notes)
            assert column in tex, (path, column)
        for row in body:
            for column, cell in zip(header, row, strict=True):
                assert not re.search(r"\bnan\b", cell, re.IGNORECASE), (path, column, cell)
                assert not re.fullmatch(r"-?\d+\.0", cell), (path, column, cell)
                assert cell not in ("True", "False"), (path, column, cell)  # one word: yes/no
                if column in LEVEL_COLUMNS:
                    assert not cell.startswith("+"), (path, column, cell)
    for table in {p.stem for p in tables.glob("*.md")}:
        md = (tables / f"{table}.md").read_text()
        html = (tables / f"{table}.html").read_text()
        assert not re.search(r"\bnan\b", md + html, re.IGNORECASE), table
        assert re.search(r"^\*.+\*$", md, re.MULTILINE) and "<caption>" in html, table
        assert "+0.95" not in md + html, table
    main = (tables / "main.md").read_text()
    # No row has a note on the default world, so the copies have no Note column.
    pairwise = pd.read_csv(tables / "ranking_contrasts.csv", comment="#")
    for row in pairwise.itertuples():
        verdict = json.loads((built / "results/verdicts" / f"{row.contrast}.json").read_text())
        assert row.confidence == verdict["confidence"], row
        assert row.p_value == pytest.approx(verdict["p_value"]), row
    header = "| Run | Skills | Reward | r_success | r_attrs | r_budget | r_category | r_strict |"
    assert f"{header} Coverage | Tokens/task |\n" in main
    assert "95% CI" in main and "| base-free | none |" in main


# Ctrl-C in the middle of a build (issue 30): quiet, and one command resumes it to a clean
# build's results (the build and its interrupt: conftest.resumed_paper_build).


def test_an_interrupted_build_is_quiet_and_one_command_resumes_it(
    resumed_paper_build: tuple[Path, str], built: Path
) -> None:
    workdir, stderr_text = resumed_paper_build
    assert "Traceback" not in stderr_text and "KeyboardInterrupt" not in stderr_text
    # One line per stopped job, then the command that resumes; none of Snakemake's failure
    # blocks (file lists, "look above for error messages").
    for noise in ("Error in rule ", "RuleException", "    input:", "Look above", "WorkflowError"):
        assert noise not in stderr_text, stderr_text[-3000:]
    assert re.search(r"^skilleval: stopped \w+", stderr_text, re.M), stderr_text[-3000:]
    last = stderr_text.strip().splitlines()[-1]
    assert last.startswith("skilleval: build interrupted") and "Resume with: " in last, last
    assert last.endswith("paper -j 2 --configfile config/small.yaml"), last
    for table in sorted((built / "paper" / "tables").glob("*.md")):
        resumed = workdir / "paper" / "tables" / table.name
        assert resumed.read_text() == table.read_text(), table.name
    for summary in sorted((built / "results" / "runs").glob("*/results.jsonl")):
        resumed = workdir / summary.relative_to(built)
        assert resumed.read_bytes() == summary.read_bytes(), summary


def test_every_paper_figure_labels_its_axes(
    built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each figure of the built paper drawn again from its inputs, its axes read from the
    figure objects: every axes that draws data names both of its axes."""
    import matplotlib.figure

    from skilleval import paths
    from skilleval.checkpoints.diff import weight_change_figure
    from skilleval.report.ablation_tables import ablation_figures
    from skilleval.report.figures import beta_plot, forest_plot

    drawn: list[matplotlib.figure.Figure] = []
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", lambda fig, *a, **k: drawn.append(fig))
    monkeypatch.chdir(built)
    out = str(tmp_path / "figure")
    verdicts = sorted(Path(paths.VERDICT).parent.glob("*.json"))
    forest_plot({v.stem: str(v) for v in verdicts}, out, out, "contrasts")
    [beta] = Path("results/gate").glob("*/beta.json")
    beta_plot(str(beta), str(beta.with_name("truth_check.json")), out, out)
    diff = json.loads(Path(paths.WEIGHT_DIFF).read_text())
    weight_change_figure(diff, out, out, ("base", "final"))
    matrix = "config/ablation/planted.yaml"
    groups = sorted(yaml.safe_load(Path(matrix).read_text())["groups"])
    ablation_figures(matrix, groups, [out] * len(groups), [out] * len(groups), out)
    axes = [ax for fig in drawn for ax in fig.axes if ax.lines or ax.collections or ax.patches]
    assert len(axes) >= 3 + len(groups)
    unlabelled = [
        f"{ax.get_title()!r}: x {ax.get_xlabel()!r}, y {ax.get_ylabel()!r}"
        for ax in axes
        if not (ax.get_xlabel() and ax.get_ylabel())
    ]
    assert unlabelled == []


def test_the_report_links_each_main_and_ranking_row_to_the_records_behind_it(
    built: Path,
) -> None:
    from html.parser import HTMLParser

    front = (built / "results" / "report" / "front.html").read_text()

    class Links(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.hrefs: list[str] = []
            self.ids: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            values = dict(attrs)
            if tag == "a" and values.get("href", "").startswith("#"):  # type: ignore[union-attr]
                self.hrefs.append(str(values["href"])[1:])
            if tag == "details":
                self.ids.append(str(values["id"]))

    parsed = Links()
    parsed.feed(front)
    rows = [*CONTRASTS, "base-free", "base-S0", "final-free", "final-ST"]
    ranking = [
        "rank-top-vs-free", "rank-random-vs-free", "rank-bottom-vs-free",
        "rank-top-vs-bottom", "rank-top-vs-random", "rank-random-vs-bottom",
    ]  # fmt: skip
    assert sorted(parsed.hrefs) == sorted(f"why-{r}" for r in [*rows, *ranking])
    assert sorted(parsed.ids) == sorted(parsed.hrefs)
    assert '<td><a href="#why-rank-top-vs-free">Top-4</a></td>' in front
    top = front[front.index('<details id="why-rank-top-vs-free">') :]
    assert "results/runs/rank-top-4/summary.json" in top[: top.index("</details>")]
    for run in ("base-free", "final-ST"):
        summary = json.loads((built / f"results/runs/{run}/summary.json").read_text())
        block = front[front.index(f'<details id="why-{run}">') :]
        block = block[: block.index("</details>")]
        for key in ("fingerprint", "checkpoint_fingerprint", "split_hash", "code_fingerprint"):
            assert summary[key] in block, (run, key)


def test_an_episode_shows_how_it_scored_and_a_mistyped_run_is_named(built: Path) -> None:
    record = next(
        r for r in read_jsonl(built / "results/runs/base-free/results.jsonl")
        if r["task_id"] == "test-0000"
    )  # fmt: skip
    shown = skilleval_cli(built, "episode", "base-free", "test-0000")
    assert shown.returncode == 0, shown.stderr
    assert f"=== scored: reward {record['reward']:.4g}, " in shown.stdout, shown.stdout
    # what answered it: the sim policy in process, on the registered checkpoint's weights
    answered = record["answered"]
    assert f"answered by: {answered['server']}; replies named: none named" in shown.stdout
    assert answered["server"].startswith("model qwen35-4b-base-hf, sim, weights ")
    as_json = json.loads(skilleval_cli(built, "episode", "base-free", "test-0000", "--json").stdout)
    assert as_json["scores"]["r_success"] == record["r_success"]
    typo = skilleval_cli(built, "episode", "base-fre", "test-0000")
    assert typo.returncode == 2 and "(did you mean base-free" in typo.stderr, typo.stderr
    masked = skilleval_cli(built, "episode", "masked-03", "val-0001")
    assert masked.returncode == 0 and "=== scored: reward " in masked.stdout, masked.stderr


def test_the_latex_tables_are_unscaled_with_a_header_over_every_column(built: Path) -> None:
    """No table is shrunk to the page (its type would be smaller than its neighbours'), no
    row leaves an empty last column, and numbers sit on their decimal point (dcolumn)."""
    for tex in sorted((built / "paper" / "tables").glob("*.tex")):
        text = tex.read_text()
        assert r"\resizebox" not in text, tex.name
        rows = [line for line in text.splitlines() if line.rstrip().endswith(r"\\")]
        assert not [r for r in rows if re.search(r"&\s*\\\\\s*$", r)], tex.name
    main = (built / "paper" / "tables" / "main.tex").read_text()
    assert main.count("D{.}{.}{-1}") >= 2 and r"\multicolumn{1}{c}{Reward}" in main
    harness = (built / "paper" / "tables" / "harness.tex").read_text()
    blocks = [b for b in re.findall(r"^(\w+) & ", harness, flags=re.M) if b != "Benchmark"]
    assert blocks and len(blocks) == len(set(blocks)), "a benchmark named once per block"
