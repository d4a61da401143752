"""Exact staleness on a built graph: for each kind of edit, the exact stale outputs.

Every case asserts two things: the jobs Snakemake's dry run reported (the plan file
``skilleval stale --plan-file`` keeps) and what ``skilleval stale`` names are the same
outputs, and those are exactly the outputs the edit can change. The workflow copy carries
its own copy of the package, so code edits stay inside it. The edits whose builds are
checked too are in tests/test_staleness_builds.py.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from skilleval.provenance.identity import DIGEST_LENGTH as DIGEST
from skilleval.report.cells import markdown_tables
from tests.conftest import dry_run_outputs, planned, skilleval_cli, snakemake, unfrozen
from tests.stale_oracle import (
    CONFIG,
    EVERY_RUN,
    MAIN,
    causes_by_cell,
    edited,
    model_runs,
    stale,
    stale_and_costs,
    stems,
    with_sim_jobs_as_one,
)  # fmt: skip

pytestmark = pytest.mark.slow


def test_a_built_graph_is_clean(built: Path) -> None:
    assert stale(built, "paper") == {}
    # A first build supersedes nothing: its gate history is bookkeeping, not an archive.
    assert not (built / "results" / "archive").exists()
    assert list((built / "results" / "history" / "gate" / "draft16").glob("*/beta.json"))


def test_comment_and_docstring_edits_change_nothing(built: Path) -> None:
    module = built / "skilleval" / "analysis" / "bootstrap.py"
    with edited(module, lambda t: t.replace('"""', '"""Reworded. ', 1) + "\n# a comment\n"):
        assert stale(built, "paper") == {}


def test_touching_a_checkpoint_changes_nothing(built: Path) -> None:
    weights = built / "results/world/checkpoints/base/model.safetensors"
    weights.touch()
    assert stale(built, "paper") == {}


def test_a_bootstrap_behaviour_edit_makes_contrasts_gate_and_tables_stale(built: Path) -> None:
    module = built / "skilleval" / "analysis" / "bootstrap.py"
    with edited(module, lambda t: t + "\nBATCH_SIZE_NOTE = 1\n"):
        jobs = stale(built, "paper")
    assert set(jobs) == {
        "contrast", "verdict", "gate_beta", "freeze_bank", "eval_run", "paper_main_table",
        "paper_forest_plot", "paper_ranking_table", "paper_beta_plot", "gate_truth_check",
        "report_front", "paper_verdict_family", "paper_notice",
    }  # fmt: skip
    # only the ranking arms' runs
    assert stems(jobs["eval_run"]) == {"summary", "results", "transcripts.jsonl"}
    assert all("rank-" in o for o in jobs["eval_run"])


def test_a_rollout_edit_makes_every_evaluation_run_stale_but_no_ablation(built: Path) -> None:
    module = built / "skilleval" / "env" / "rollout.py"
    with edited(module, lambda t: t + "\nROLLOUT_NOTE = 1\n"):
        jobs = stale(built, "paper")
    assert {"eval_run", "gate_masked_run", "contrast", "paper_main_table"} <= set(jobs)
    # The ground truth is computed through the rollout loop, so it is stale too.
    assert "world_ground_truth" in jobs
    assert not {"world_tasks", "world_checkpoint", "world_bank"} & set(jobs)
    assert not any(rule.startswith(("ablation", "harness")) for rule in jobs)


def test_a_trainer_edit_makes_only_the_ablation_evidence_stale(built: Path) -> None:
    module = built / "skilleval" / "ablation" / "trainer.py"
    with edited(module, lambda t: t + "\nTRAINER_NOTE = 1\n"):
        jobs = stale(built, "paper")
    jobs = with_sim_jobs_as_one(jobs)
    # paper_notice and report_front: the title page and the report's first view say what
    # built every ablation run.
    assert set(jobs) == {
        "ablation_runs", "ablation_table", "harness_table", "ablation_figures", "paper_notice",
        "report_front",
    }  # fmt: skip
    assert len(jobs["ablation_runs"]) == 2 * 216


def test_a_checkpoint_audit_edit_reaches_contrasts_through_the_audits(built: Path) -> None:
    module = built / "skilleval" / "checkpoints" / "audit.py"
    with edited(module, lambda t: t + "\nAUDIT_NOTE = 1\n"):
        jobs = stale(built, "paper")
    assert {"audit_checkpoint", "audit_weight_diff", "contrast"} <= set(jobs)
    assert "eval_run" not in jobs and "ablation_run" not in jobs


def test_a_report_edit_makes_only_the_tables_stale(built: Path) -> None:
    module = built / "skilleval" / "report" / "tables.py"
    with edited(module, lambda t: t.replace('DAGGER = r"$^\\dagger$"', 'DAGGER = r"$^\\ddagger$"')):
        # report_front: the report's first view is built from the main table.
        assert set(stale(built, "paper")) == {
            "paper_main_table",
            "report_front",
            "paper_ranking_table",
        }


def test_a_template_edit_makes_only_its_table_stale(built: Path) -> None:
    template = built / "skilleval" / "report" / "templates" / "ranking_table.tex.j2"
    with edited(template, lambda t: t.replace("\\toprule", "\\toprule %", 1)):
        # report_front: the report's first view shows the ranking table's HTML copy.
        assert set(stale(built, "paper")) == {"paper_ranking_table", "report_front"}


def test_a_draft_chunk_text_makes_only_the_draft_bank_lineage_stale(built: Path) -> None:
    generator = built / "skilleval" / "world" / "design.py"
    old = "Prefer plain language over jargon when you explain a choice."
    with edited(generator, lambda t: t.replace(old, "Prefer plain words when you explain.")):
        jobs = stale(built, "paper")
    assert jobs["world_bank"] == {"results/world/banks/draft16.md"}
    assert "world_tasks" not in jobs and "world_checkpoint" not in jobs
    assert {"gate_masked_run", "gate_beta", "freeze_bank"} <= set(jobs)
    assert all("rank-" in o for o in jobs["eval_run"])
    assert stems(jobs["contrast"]).isdisjoint(MAIN)


# What a change of the statistics recomputes: contrasts, verdicts and what shows them.
STATISTICS_JOBS = {
    "contrast", "verdict", "paper_main_table", "paper_forest_plot", "report_front",
    "paper_ranking_table", "paper_verdict_family",
}  # fmt: skip


def test_n_resamples_makes_contrasts_verdicts_and_tables_stale(built: Path) -> None:
    small = built / "config" / "small.yaml"
    with edited(small, lambda t: t.replace("n_resamples: 1000", "n_resamples: 500")):
        jobs = stale(built, "paper")
        why = skilleval_cli(built, "stale", "--root", str(built), *CONFIG).stdout
    assert set(jobs) == STATISTICS_JOBS
    assert causes_by_cell(why)["Table main, s0-gain"] == ["statistics.n_resamples 1000 -> 500"]


def test_the_interval_method_plans_contrasts_verdicts_and_tables_and_no_run(built: Path) -> None:
    """Changing statistics.method (docs/statistics.md) re-computes no evaluation run."""
    config = built / "config" / "config.yaml"
    shipped = re.search(r"^  method: (\w+)$", config.read_text(), re.MULTILINE)
    assert shipped is not None
    other = "BCa" if shipped[1] != "BCa" else "t"
    with edited(config, lambda t: t.replace(shipped[0], f"  method: {other}")):
        jobs = stale(built, "paper")
    assert set(jobs) == STATISTICS_JOBS


def test_a_contrast_description_makes_only_the_main_table_stale(built: Path) -> None:
    config = built / "config" / "config.yaml"
    with edited(config, lambda t: t.replace("Cold-start skill gain", "Gain of S0 at cold start")):
        assert set(stale(built, "paper")) == {"paper_main_table", "report_front"}


def test_a_protocol_value_makes_its_runs_and_dependents_stale(built: Path) -> None:
    config = built / "config" / "config.yaml"
    with (
        unfrozen(built),
        edited(config, lambda t: t.replace("temperature: 0.6", "temperature: 0.7", 1)),
    ):
        jobs = stale(built, "paper")
    assert {"eval_run", "gate_masked_run", "contrast", "paper_main_table"} <= set(jobs)
    assert "world_tasks" not in jobs and "ablation_run" not in jobs


def test_server_addresses_timeouts_and_start_up_limits_plan_nothing(built: Path) -> None:
    protocols = "".join(
        f"  {name}:\n"
        "    execution:\n"
        "      environment: {url: 'http://envs.example.org:5701'}\n"
        "      model_server:\n"
        "        base_url: 'http://127.0.0.1:30016/v1'\n"
        "        request_timeout_s: 900\n"
        + ("        launch: {startup_timeout_s: 1800}\n" if name == "local-sglang" else "")
        for name in ("local-sglang", "hosted-api")
    )
    (built / "config" / "moved.yaml").write_text(f"protocols:\n{protocols}")
    assert stale(built, "paper", configfiles=("config/small.yaml", "config/moved.yaml")) == {}


def test_an_identical_matrix_copy_changes_nothing(built: Path) -> None:
    shutil.copy(built / "config/ablation/planted.yaml", built / "config/ablation/copy.yaml")
    small = built / "config" / "small.yaml"
    with edited(small, lambda t: t.replace("ablation/planted.yaml", "ablation/copy.yaml")):
        assert stale(built, "paper") == {}


def test_one_learning_rate_changes_the_identity_of_exactly_three_runs(built: Path) -> None:
    matrix = built / "config/ablation/planted.yaml"
    old, new = '"2": {optimizer.learning_rate: 2}', '"2": {optimizer.learning_rate: 3}'
    with edited(matrix, lambda t: t.replace(old, new)):
        jobs = stale(built, "paper")
        why = skilleval_cli(built, "stale", "--root", str(built), *CONFIG).stdout
    # The sim trainer's runs are one job per benchmark: the three benchmarks' jobs re-run,
    # and restore every run but these.
    three_jobs = {f"ablation_runs_{b}" for b in ("livemathematicianbench", "alfworld", "docvqa")}
    assert set(jobs) == three_jobs | {
        "ablation_figures", "ablation_table", "harness_table", "paper_notice", "report_front"
    }  # fmt: skip
    three = {f"LR-{b}-2" for b in ("livemathematicianbench", "alfworld", "docvqa")}
    assert (
        set(re.findall(rf"ablation run (\S+): evidence identity '[0-9a-f]{{{DIGEST}}}' -> ", why))
        == three
    )
    # Only their table cells can change: the job restores every other run unchanged.
    cells = {cell for cell in causes_by_cell(why) if cell.startswith("Table ablation_")}
    assert {cell.split(", ")[1] for cell in cells if ", " in cell} == three
    for bench in ("livemathematicianbench", "alfworld", "docvqa"):
        assert f"Sim trainer job ({bench}): 1 of " in why
    assert "Sim trainer job (searchqa)" not in why


def test_a_split_file_edit_makes_runs_stale(built: Path) -> None:
    splits = built / "results/world/persona_splits.v1.json"
    with edited(splits, lambda t: t.replace('"a student"', '"a teacher"', 1)):
        jobs = stale(built, "paper")
    assert {"eval_run", "gate_masked_run", "gate_design"} <= set(jobs)
    assert "world_tasks" not in jobs


def test_a_shard_byte_makes_its_runs_and_audit_stale(built: Path) -> None:
    weights = built / "results/world/checkpoints/final/model.safetensors"
    original = weights.read_bytes()
    weights.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
    try:
        jobs = stale(built, "paper")
    finally:
        weights.write_bytes(original)
    assert {"eval_run", "audit_checkpoint", "audit_weight_diff"} <= set(jobs)
    assert all("final" in o for o in jobs["eval_run"])


def test_a_missing_config_input_stops_the_dry_run_naming_the_key(built: Path) -> None:
    config = built / "config" / "config.yaml"
    with edited(config, lambda t: t.replace("results/world/banks/ST.md", "banks/ST-missing.md")):
        done = snakemake(built, "-n", "paper", *CONFIG, check=False)
    assert done.returncode != 0
    assert (
        "banks.ST.path" in done.stderr + done.stdout
        and "does not exist" in done.stderr + done.stdout
    )


# The evidence-identity corpus (issue 23): for each edit, which model or trainer runs are
# planned, and what the build then computes.


def test_a_message_or_a_log_format_plans_nothing(built: Path) -> None:
    errors = built / "skilleval" / "errors.py"
    with edited(errors, lambda t: t.replace("\\n  fix: {fix}", "\\n  how to fix: {fix}")):
        assert stale(built, "paper") == {}
    logs = built / "skilleval" / "logs.py"
    bracketed = "%(asctime)s [%(levelname)s]"
    with edited(logs, lambda t: t.replace("%(asctime)s %(levelname)s", bracketed)):
        assert stale(built, "paper") == {}


def test_a_table_renderer_edit_plans_no_run(built: Path) -> None:
    module = built / "skilleval" / "report" / "latex.py"
    with edited(module, lambda t: t + "\ndef unused_renderer() -> None:\n    return None\n"):
        assert model_runs(stale(built, "paper")) == set()


@pytest.mark.parametrize(
    ("module", "old", "new"),
    [
        ("skilleval/world/sim_policy.py", "TASK_CORRELATION = 0.9", "TASK_CORRELATION = 0.8"),
        ("skilleval/world/shopsim.py", '{"reward": strict,', '{"reward": 0.9 * strict,'),
        # The skill-injection template is protocol, not code (config/prompts).
        ("config/prompts/skills.j2", "### Skill {{", "## Skill {{"),
    ],
    ids=["sim-policy", "env-reward", "skill-rendering"],
)
def test_a_behaviour_edit_makes_every_run_that_uses_it_certain(
    built: Path, module: str, old: str, new: str
) -> None:
    # The prompt files are the frozen protocol's too: unfrozen to see what the graph does.
    with unfrozen(built), edited(built / module, lambda t: t.replace(old, new, 1)):
        jobs, costs = stale_and_costs(built, "paper")
    assert len(model_runs(jobs)) == EVERY_RUN and set(costs.values()) == {"certain"}
    assert not any(rule.startswith("ablation") for rule in jobs)


def test_another_registered_system_prompt_makes_every_model_run_certain(built: Path) -> None:
    prompts, overlay = built / "config" / "prompts", built / "config" / "prompt.yaml"
    shutil.copy(prompts / "shop-assistant.system.txt", prompts / "copy.system.txt")
    (prompts / "terse.system.txt").write_text("You are a terse shopping assistant.\n")
    configs = ("config/small.yaml", "config/prompt.yaml")

    def register(system: str) -> None:
        overlay.write_text(
            "protocols:\n  local-sglang:\n    prompt:\n"
            f"      {{system: config/prompts/{system}, skill_template: config/prompts/skills.j2}}\n"
        )

    try:
        register("copy.system.txt")  # the same text under another name: the same runs
        assert stale(built, "paper", configfiles=configs) == {}
        register("terse.system.txt")  # another prompt: refused for the frozen protocol
        with unfrozen(built):
            jobs, costs = stale_and_costs(built, "paper", configfiles=configs)
    finally:
        for path in (overlay, prompts / "copy.system.txt", prompts / "terse.system.txt"):
            path.unlink()
    assert len(model_runs(jobs)) == EVERY_RUN and set(costs.values()) == {"certain"}
    assert "paper_main_table" in jobs
    assert not any(rule.startswith("ablation") for rule in jobs)


def test_stale_with_the_gpu_host_profile_names_the_dry_runs_set_and_prices_it(
    built: Path,
) -> None:
    profile = ("--profile", "profiles/gpu-host")
    jobs = dry_run_outputs(built, "paper", *profile, *CONFIG)
    jobs.pop("paper", None)
    command = ["stale", "--root", str(built), "paper", *profile, *CONFIG]
    text = skilleval_cli(built, *command).stdout
    told = skilleval_cli(built, *command, "--json").stdout
    planned = [job for job in json.loads(told) if job["rule"] != "paper"]
    assert {o for job in planned for o in job["outputs"]} == set().union(*jobs.values())
    # The profile's backends (OpenAI client, HTTP environment, launched servers) are
    # another identity: every model run is certain, on the cards its protocol serves with.
    costs = [job["cost"] for job in planned if job["cost"]]
    assert len(costs) == EVERY_RUN and {c["kind"] for c in costs} == {"certain"}
    assert {c["cards"] for c in costs} == {4} and all(c["card_hours"] > 0 for c in costs)
    assert f"certain: {EVERY_RUN} run(s)" in text and "card-hours" in text


def test_why_walks_a_main_table_cell_down_to_its_runs_and_says_what_went_stale(
    built: Path,
) -> None:
    def why(*cell: str) -> tuple[int, str, list[dict[str, object]]]:
        args = ("why", "main", *cell, "--root", str(built), "--configfile", "config/small.yaml")
        text = skilleval_cli(built, *args)
        data = skilleval_cli(built, *args, "--json")
        assert "Traceback" not in text.stderr + data.stderr, text.stderr
        return text.returncode, text.stdout, json.loads(data.stdout)["chain"]

    code, printed, links = why("s0-gain", "p_Holm")
    assert code == 0, printed
    family = json.loads((built / "results/paper/verdict_family_main.json").read_text())
    (member,) = [m for m in family["members"] if m["name"] == "s0-gain"]
    assert printed.startswith("Table main (Contrasts), s0-gain, p_Holm: ")
    assert f"p_holm: {member['p_holm']}" in printed
    assert [link["what"] for link in links] == [
        "verdict family", "verdict", "contrast", "run base-S0", "run base-free",
    ]  # fmt: skip
    assert {link["status"] for link in links} == {"current"}
    summaries = {
        name: json.loads((built / f"results/runs/{name}/summary.json").read_text())
        for name in ("base-S0", "base-free")
    }
    for name, summary in summaries.items():
        for value in ("fingerprint", "checkpoint_fingerprint", "split_hash", "prompt_hash",
                      "code_fingerprint"):  # fmt: skip
            assert summary[value] in printed, (name, value)
    assert summaries["base-S0"]["bank_hash"] in printed
    assert "episodes computed: 48" in printed or "episodes reused: 48" in printed
    with edited(
        built / "config" / "small.yaml",
        lambda t: t.replace("n_resamples: 1000", "n_resamples: 2000"),
    ):
        code, printed, links = why("s0-gain")
    states = {link["what"]: (link["status"], link["reasons"]) for link in links}
    assert code == 1
    assert states["contrast"] == ("stale", ["statistics.n_resamples 1000 -> 2000"])
    assert states["run base-S0"] == ("current", [])
    assert "contrast: results/contrasts/s0-gain.json, stale (statistics.n_resamples" in printed


def test_why_answers_a_cell_of_every_table_by_its_label_with_its_value(built: Path) -> None:
    """One cell of each table, named as the table prints it: the first row's label (its
    first cell, or its first two for a trainer table) and a numeric column's header."""
    tables = built / "paper" / "tables"
    ablation = sorted(tables.glob("ablation_*.md"))[0].stem
    asked = [
        ("main", "main", "Runs", 1, "Reward"),
        ("ranking", "ranking", "Ranking arms", 1, "p_Holm"),
        ("betas", "ranking", "Chunk betas", 1, "β"),
        ("harness", "harness", "Runs", 2, "Codex"),
        (ablation, ablation, "Runs", 2, "Best test"),
    ]
    for table, markdown, section, label_cells, column in asked:
        first = markdown_tables((tables / f"{markdown}.md").read_text())[section][0]
        row = " ".join(list(first.values())[:label_cells]).rstrip("*")
        args = (
            "why",
            table,
            row,
            column,
            "--root",
            str(built),
            "--configfile",
            "config/small.yaml",
        )
        done = skilleval_cli(built, *args, "--json")
        assert done.returncode == 0 and "Traceback" not in done.stderr, (table, done.stderr)
        answer = json.loads(done.stdout)
        assert answer["cell"]["value"] == first[column], (table, answer["cell"])
        chain = answer["chain"]
        assert chain and {link["status"] for link in chain} == {"current"}, (table, chain)
        assert all((built / link["path"]).is_file() for link in chain)
    # The number is the record's: final-ST's reward, rounded as the table rounds it.
    summary = json.loads((built / "results/runs/final-ST/summary.json").read_text())
    args = ("why", "main", "final-ST", "Reward", "--root", str(built))
    done = skilleval_cli(built, *args, "--configfile", "config/small.yaml")
    assert f"final-ST, Reward: {summary['reward']:.4f}" in done.stdout


def test_a_report_says_on_its_front_page_whether_the_graph_is_current(built: Path) -> None:
    """Made from a current graph it says so; made after a config change it says that the
    graph is out of date, with as many pending jobs as `snakemake -n paper` has."""
    small = ("--configfile", "config/small.yaml")
    snakemake(built, "--report", "report.html", *small)
    assert "<b>Current.</b>" in (built / "results/report/status.html").read_text()
    assert "<b>Current.</b>" in (built / "report.html").read_text()
    overlay = built / "config" / "more-resamples.yaml"
    overlay.write_text("statistics:\n  n_resamples: 1500\n")
    try:
        both = (*small, str(overlay))  # one --configfile takes both (nargs="+")
        pending = [job for job in planned(built, "-n", "paper", *both) if job.outputs]
        snakemake(built, "--report", "report.html", *both)
    finally:
        overlay.unlink()
    status = (built / "results/report/status.html").read_text()
    assert f"has {len(pending)} job(s) pending" in status and pending
    assert "statistics.n_resamples 1000 -&gt; 1500" in status
    assert "Out of date." in (built / "report.html").read_text()
