"""Exact staleness on a built graph: for each kind of edit, the exact stale outputs.

Every case asserts two things: ``snakemake -n`` and ``skilleval stale`` name the same
outputs (one oracle), and those are exactly the outputs the edit can change. The
workflow copy carries its own copy of the package, so code edits stay inside it.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from skilleval.provenance.identity import DIGEST_LENGTH as DIGEST
from tests.conftest import dry_run_outputs, skilleval_cli, snakemake, unfrozen

pytestmark = pytest.mark.slow

CONFIG = ("--configfile", "config/small.yaml")
MAIN = {"s0-gain", "internalisation", "internalisation-gap", "upper-bound", "final-vs-initial"}


@pytest.fixture(scope="module")
def built(small_paper: Path) -> Path:
    return small_paper


def stale(
    workdir: Path, *args: str, configfiles: tuple[str, ...] = ("config/small.yaml",)
) -> dict[str, set[str]]:
    """Rule -> stale outputs, asserting that the dry run and skilleval stale agree."""
    return stale_and_costs(workdir, *args, configfiles=configfiles)[0]


def stale_and_costs(
    workdir: Path, *args: str, configfiles: tuple[str, ...] = ("config/small.yaml",)
) -> tuple[dict[str, set[str]], dict[str, str]]:
    """(rule -> stale outputs, run summary -> certain or conditional), asserting that the
    dry run and skilleval stale agree on the outputs."""
    jobs = dry_run_outputs(workdir, *args, "--configfile", *configfiles)
    jobs.pop("paper", None)
    targets = [a for a in args if not a.startswith("-")] or ["paper"]
    done = skilleval_cli(
        workdir, "stale", "--json", "--root", str(workdir), *targets, "--configfile", *configfiles
    )
    assert done.returncode in (0, 1), done.stderr
    told: dict[str, set[str]] = {}
    costs: dict[str, str] = {}
    for job in json.loads(done.stdout):
        if job["rule"] != "paper":
            told.setdefault(job["rule"], set()).update(job["outputs"])
        if job["cost"]:
            summary = next(o for o in job["outputs"] if o.endswith("summary.json"))
            costs[summary] = job["cost"]["kind"]
    assert told == {rule: outputs for rule, outputs in jobs.items() if outputs}
    return jobs, costs


MODEL_RULES = ("eval_run", "gate_masked_run", "ablation_run")
# The sim trainer's jobs, one per benchmark (rules/ablation.smk): ablation_runs_<bench>.
SIM_JOBS = "ablation_runs_"
STAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
PROGRESS = re.compile(r"\] (\d+)/\d+ tasks .*?done, reused (\d+)")


def model_runs(jobs: dict[str, set[str]]) -> set[str]:
    """The summaries of the planned model and trainer runs."""
    rules = [r for r in jobs if r in MODEL_RULES or r.startswith(SIM_JOBS)]
    return {o for r in rules for o in jobs[r] if o.endswith("summary.json")}


def with_sim_jobs_as_one(jobs: dict[str, set[str]]) -> dict[str, set[str]]:
    """``jobs`` with the sim trainer's per-benchmark jobs merged under 'ablation_runs'."""
    merged: dict[str, set[str]] = {}
    for rule, outputs in jobs.items():
        merged.setdefault("ablation_runs" if rule.startswith(SIM_JOBS) else rule, set()).update(
            outputs
        )
    return merged


def build_and_count(
    workdir: Path, *configfiles: str, targets: Iterable[str] = ("paper",)
) -> dict[str, int]:
    """Build ``targets`` (the paper unless told); model run log -> episodes its job computed
    in this build: 0 for a job that restored its kept result."""
    started = dt.datetime.now() - dt.timedelta(seconds=1)
    snakemake(workdir, *targets, "-j", "2", "--configfile", *(configfiles or CONFIG[1:]))
    computed: dict[str, int] = {}
    for path in (workdir / "results" / "logs").rglob("*.log"):
        new = "\n".join(
            line
            for line in path.read_text().splitlines()
            if STAMP.match(line) and dt.datetime.fromisoformat(line[:19]) >= started
        )
        name = str(path.relative_to(workdir / "results" / "logs"))
        if "evidence unchanged" in new:
            computed[name] = 0
        elif progress := PROGRESS.findall(new):
            done, reused = progress[-1]
            computed[name] = int(done) - int(reused)
    return computed


@contextmanager
def edited(path: Path, change: Callable[[str], str]) -> Iterator[None]:
    original = path.read_bytes()
    text = original.decode()
    changed = change(text)
    assert changed != text, f"the edit of {path} changed nothing"
    path.write_text(changed)
    try:
        yield
    finally:
        path.write_bytes(original)


def stems(outputs: set[str]) -> set[str]:
    return {Path(o).stem for o in outputs}


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


def test_n_resamples_makes_contrasts_verdicts_and_tables_stale(built: Path) -> None:
    small = built / "config" / "small.yaml"
    with edited(small, lambda t: t.replace("n_resamples: 1000", "n_resamples: 500")):
        jobs = stale(built, "paper")
        why = skilleval_cli(built, "stale", "--root", str(built), *CONFIG).stdout
    assert set(jobs) == {
        "contrast",
        "verdict",
        "paper_main_table",
        "paper_forest_plot",
        "report_front",
        "paper_ranking_table",
        "paper_verdict_family",
    }
    assert "Table main, s0-gain: statistics.n_resamples 1000 -> 500" in why


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
        "    environment: {url: 'http://envs.example.org:5701'}\n"
        "    model_server:\n"
        "      base_url: 'http://127.0.0.1:30016/v1'\n"
        "      request_timeout_s: 900\n"
        + ("      launch: {startup_timeout_s: 1800}\n" if name == "local-sglang" else "")
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
    cells = {line.split(":")[0] for line in why.splitlines() if line.startswith("Table ablation_")}
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


def test_after_a_forced_run_both_name_its_dependents(built: Path) -> None:
    summary = built / "results/runs/final-ST/summary.json"
    before = summary.read_bytes()
    snakemake(built, "-f", "results/runs/final-ST/summary.json", "-j", "1", *CONFIG)
    # Its result is kept, so the forced job restores it byte for byte; Snakemake compares
    # the checksum of an input newer than its outputs, so nothing below it is stale.
    assert summary.read_bytes() == before and stale(built, "paper") == {}
    for kept in (built / "results/journal/final-ST").glob("*.complete"):
        shutil.rmtree(kept)
    snakemake(built, "-f", "results/runs/final-ST/summary.json", "-j", "1", *CONFIG)
    jobs = stale(built, "paper")
    assert stems(jobs["contrast"]) == {"internalisation-gap", "upper-bound", "final-vs-initial"}
    snakemake(built, "paper", "-j", "2", *CONFIG)
    assert stale(built, "paper") == {}


def test_archiving_a_run_makes_the_next_build_redo_it_and_its_dependents(built: Path) -> None:
    done = skilleval_cli(built, "archive", "base-free", "--reason", "test", "--root", str(built))
    assert done.returncode == 0, done.stderr
    jobs = stale(built, "paper")
    assert "results/runs/base-free/summary.json" in jobs["eval_run"]
    assert {"s0-gain", "internalisation"} <= stems(jobs["contrast"])
    snakemake(built, "paper", "-j", "2", *CONFIG)
    assert stale(built, "paper") == {}


def comparable(path: Path) -> object:
    """A built file's content without its provenance blocks (JSON) or as bytes."""
    if path.suffix not in (".json", ".jsonl"):
        return path.read_bytes()

    def strip(value: object) -> object:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != "provenance"}
        return [strip(v) for v in value] if isinstance(value, list) else value

    lines = path.read_text().splitlines() if path.suffix == ".jsonl" else [path.read_text()]
    return [strip(json.loads(line)) for line in lines if line.strip()]


def test_a_second_build_in_another_directory_is_identical(
    built: Path, resumed_paper_build: tuple[Path, str]
) -> None:
    # The second build (conftest.resumed_paper_build) ran one directory deeper, and was
    # interrupted and resumed: neither may show in what it built.
    other = resumed_paper_build[0]
    compared, differing = 0, []
    for folder in ("results", "paper/tables", "paper/figures"):
        for path in sorted((built / folder).rglob("*")):
            relative = path.relative_to(built)
            skipped = relative.parts[:2] in {("results", p) for p in ("logs", "journal", "archive")}
            if path.is_dir() or skipped or relative.name.endswith(".log"):
                continue
            compared += 1
            twin = other / relative
            if not twin.exists() or comparable(path) != comparable(twin):
                differing.append(str(relative))
    assert compared > 1000 and differing == [], differing[:20]


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


def test_a_statistics_helper_reruns_the_bank_freeze_but_computes_no_episode(built: Path) -> None:
    module = built / "skilleval" / "analysis" / "bootstrap.py"
    ranked = {f"results/runs/{r}/summary.json" for r in RANKED}
    before = {r: (built / r).read_bytes() for r in ranked}
    with edited(module, lambda t: t + "\ndef unused_helper() -> int:\n    return 1\n"):
        jobs, costs = stale_and_costs(built, "paper")
        assert model_runs(jobs) == ranked
        assert set(costs.values()) == {"conditional"}  # the frozen banks may come out the same
        # The runs and what they need; the tables under the edit are another test's matter.
        computed = build_and_count(built, targets=sorted(ranked))
    assert {computed[f"runs/{r}.log"] for r in RANKED} == {0}
    assert {r: (built / r).read_bytes() for r in ranked} == before
    # The revert, likewise (as in the rollout test, the paper: the banks were refrozen).
    assert build_and_count(built).get("runs/rank-top-4.log") == 0
    assert stale(built, "paper") == {}


RANKED = ("rank-top-4", "rank-bottom-4", "rank-random-4-20260907")
EVERY_RUN = 20  # 8 evaluation runs and 12 masked Gate A runs of the small world


def test_a_rollout_edit_recomputes_every_episode_and_its_revert_restores_them(
    built: Path,
) -> None:
    module = built / "skilleval" / "env" / "rollout.py"
    old = "        while steps < max_steps:"
    with edited(module, lambda t: t.replace(old, "        while steps < max_steps - 5:")):
        jobs, costs = stale_and_costs(built, "paper")
        runs = sorted(model_runs(jobs))
        assert len(runs) == EVERY_RUN and set(costs.values()) == {"certain"}
        # The runs only: what is computed from them under the edit is no matter here.
        computed = build_and_count(built, targets=runs)
    episodes = {name: n for name, n in computed.items() if name.startswith(("runs/", "gate/"))}
    assert len(episodes) == EVERY_RUN and set(episodes.values()) == {48}  # 0 reused
    # Back to the old code: every run restores what it had, from its archived journal, byte
    # for byte; the paper then rebuilds only what the edit's build rebuilt on the way to the
    # ranked runs (the gate's betas and the frozen banks, whose provenance differs).
    computed = build_and_count(built)
    restored = {name: n for name, n in computed.items() if name.startswith(("runs/", "gate/"))}
    assert len(restored) == EVERY_RUN and set(restored.values()) == {0}
    assert stale(built, "paper") == {}


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
    with edited(built / module, lambda t: t.replace(old, new, 1)):
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
        register("terse.system.txt")
        jobs, costs = stale_and_costs(built, "paper", configfiles=configs)
    finally:
        for path in (overlay, prompts / "copy.system.txt", prompts / "terse.system.txt"):
            path.unlink()
    assert len(model_runs(jobs)) == EVERY_RUN and set(costs.values()) == {"certain"}
    assert "paper_main_table" in jobs
    assert not any(rule.startswith("ablation") for rule in jobs)


def test_identical_copies_under_new_paths_plan_nothing(built: Path) -> None:
    originals = {
        "bank": built / "results/world/banks/S0.md",
        "split": built / "results/world/persona_splits.v1.json",
        "checkpoint": built / "results/world/checkpoints/final/model.safetensors",
    }

    def overlay(folder: str) -> str:
        copies = {role: built / folder / path.name for role, path in originals.items()}
        for role, path in originals.items():
            copies[role].parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, copies[role])
        tasks = f"{{split_file: {folder}/{originals['split'].name}, split: test}}"
        text = (
            f"banks:\n  S0: {{path: {folder}/S0.md}}\n"
            f"checkpoints:\n  final: {{path: {folder}/model.safetensors}}\n"
            "protocols:\n"
            + "".join(f"  {p}:\n    tasks: {tasks}\n" for p in ("local-sglang", "hosted-api"))
        )
        (built / "config" / f"{folder}.yaml").write_text(text)
        return f"config/{folder}.yaml"

    # From built files to files the graph only reads: the runs restore what they had.
    first = overlay("copies-a")
    computed = build_and_count(built, "config/small.yaml", first)
    assert computed and set(computed.values()) == {0}
    # From one copy to another: nothing is planned at all.
    second = overlay("copies-b")
    assert stale(built, "paper", configfiles=("config/small.yaml", second)) == {}
    build_and_count(built)
    assert stale(built, "paper") == {}


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
        return text.returncode, text.stdout, json.loads(data.stdout)

    code, printed, links = why("s0-gain", "p_Holm")
    assert code == 0, printed
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
