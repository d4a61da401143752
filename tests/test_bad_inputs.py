"""A corpus of malformed configs, overlays and ablation matrices: every one is refused by
the dry run before any job, without a traceback, naming the file and the key, and
nothing is written under results/."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from skilleval.config.loading import config_sources, merged_config
from skilleval.errors import ConfigError
from skilleval.logs import PACKAGE_DIR, PACKAGE_VARIABLE, logged
from skilleval.workflow.parse_checks import check_inputs
from tests.conftest import REPO, copy_workflow, snakemake

CONFIG, OVERLAY, MATRIX = "config/config.yaml", "config/overlay.yaml", "config/ablation/matrix.yaml"


@dataclass(frozen=True)
class Case:
    target: str  # the file edited (or, for OVERLAY, written)
    edit: Any  # dict -> None mutates the parsed file; str -> str rewrites its text
    key: str  # the key the message must name
    text: bool = False
    named_file: str | None = None  # the file the message must name, if not target
    profile: str | None = None


def local(c: dict[str, Any]) -> dict[str, Any]:
    protocol: dict[str, Any] = c["protocols"]["local-sglang"]
    return protocol


def setter(path: str, value: object) -> Callable[[dict[str, Any]], None]:
    def edit(c: dict[str, Any]) -> None:
        *parents, last = path.split("/")
        node = c
        for part in parents:
            node = node[part]
        node[last] = value

    return edit


def deleter(path: str) -> Callable[[dict[str, Any]], None]:
    def edit(c: dict[str, Any]) -> None:
        *parents, last = path.split("/")
        node = c
        for part in parents:
            node = node[part]
        del node[last]

    return edit


def third_protocol_contrast(c: dict[str, Any]) -> None:
    c["runs"]["hosted-free"] = {
        "experiment": "hosted-free",
        "protocol": "hosted-api",
        "checkpoint": "base",
        "bank": None,
    }
    c["contrasts"]["s0-gain"]["control"] = "hosted-free"


def lone_checkpoint(c: dict[str, Any]) -> None:
    del c["checkpoints"]["final"]


L = "protocols/local-sglang"
CASES: dict[str, Case] = {
    "seed of wrong type": Case(CONFIG, setter("world/seed", "x"), "world.seed"),
    "negative seed": Case(CONFIG, setter("world/seed", -1), "world.seed"),
    "world dir escapes": Case(CONFIG, setter("world/dir", "../../etc/world"), "world.dir"),
    "world dir absolute": Case(CONFIG, setter("world/dir", "/tmp/world"), "world.dir"),
    "world dir is the checkout": Case(CONFIG, setter("world/dir", "."), "world.dir"),
    "one category": Case(CONFIG, setter("world/categories", 1), "world.categories"),
    "unknown policy backend": Case(CONFIG, setter("backends/policy", "gpt"), "backends.policy"),
    "unknown server kind": Case(
        CONFIG, setter("backends/model_server", "k8s"), "backends.model_server"
    ),
    "concurrency over slots": Case(
        CONFIG, setter(f"{L}/runtime/concurrency", 64), "protocols.local-sglang.runtime.concurrency"
    ),
    "zero max steps": Case(
        CONFIG, setter(f"{L}/runtime/max_steps", 0), "protocols.local-sglang.runtime.max_steps"
    ),
    "zero outage budget": Case(
        CONFIG,
        setter(f"{L}/execution/outage_budget_s", 0),
        "protocols.local-sglang.execution.outage_budget_s",
    ),
    "missing outage budget": Case(
        CONFIG, deleter(f"{L}/execution/outage_budget_s"), "protocols.local-sglang.execution"
    ),
    "outage budget in its old place": Case(
        CONFIG,
        setter(f"{L}/runtime/outage_budget_s", 600),
        "write it as protocols.local-sglang.execution.outage_budget_s",
    ),
    "temperature as text": Case(
        CONFIG,
        setter(f"{L}/sampling/temperature", "hot"),
        "protocols.local-sglang.sampling.temperature",
    ),
    "misspelt sampling key": Case(
        CONFIG,
        setter(f"{L}/sampling/temprature", 0.6),
        "protocols.local-sglang.sampling.temprature",
    ),
    "malformed environment address": Case(
        CONFIG,
        setter(f"{L}/execution/environment/url", "htp:/127.0.0.1:5700"),
        "protocols.local-sglang.execution.environment.url",
    ),
    "model server address with a space": Case(
        CONFIG,
        setter(f"{L}/execution/model_server/base_url", "http://127.0.0.1:30000 /v1"),
        "protocols.local-sglang.execution.model_server.base_url",
    ),
    "model server address in its old place": Case(
        OVERLAY,
        {"protocols": {"local-sglang": {"model_server": {"base_url": "http://h:30000/v1"}}}},
        "write it as protocols.local-sglang.execution.model_server.base_url",
    ),
    "zero tensor parallel": Case(
        CONFIG, setter(f"{L}/model_server/tp", 0), "protocols.local-sglang.model_server.tp"
    ),
    "parser as number": Case(
        CONFIG,
        setter(f"{L}/model_server/tool_call_parser", 5),
        "protocols.local-sglang.model_server.tool_call_parser",
    ),
    "retired max_retries": Case(
        CONFIG,
        setter(f"{L}/model_server/max_retries", 5),
        "protocols.local-sglang.model_server.max_retries",
    ),
    "main metric not reward": Case(
        CONFIG, setter(f"{L}/metrics/main", "r_success"), "protocols.local-sglang.metrics.main"
    ),
    "unknown split": Case(
        CONFIG, setter(f"{L}/tasks/split", "dev"), "protocols.local-sglang.tasks.split"
    ),
    "missing split file": Case(
        CONFIG,
        setter(f"{L}/tasks/split_file", "data/none.json"),
        "protocols.local-sglang.tasks.split_file",
    ),
    "one checkpoint only": Case(CONFIG, lone_checkpoint, "checkpoints"),
    "checkpoint id reused": Case(
        CONFIG,
        setter("checkpoints/final/checkpoint_id", "qwen35-4b-base-hf"),
        "checkpoints.final.checkpoint_id",
    ),
    "checkpoint file missing": Case(
        CONFIG,
        setter("checkpoints/final/path", "/nonexistent/model.safetensors"),
        "checkpoints.final.path",
    ),
    "checkpoint where no rule builds": Case(
        CONFIG,
        setter("checkpoints/final/path", "results/world/ckpts/final.safetensors"),
        "checkpoints.final.path",
    ),
    "bank not markdown": Case(CONFIG, setter("banks/ST/path", "banks/st.txt"), "banks.ST.path"),
    "unknown environment adapter": Case(
        CONFIG, setter("backends/environment", "lab-shopp"), "backends.environment"
    ),
    "unknown bank role": Case(CONFIG, setter("banks/ST/role", "best"), "banks.ST.role"),
    "bank of no chunks": Case(CONFIG, setter("banks/ST/chunks", 0), "banks.ST.chunks"),
    "run names unknown bank": Case(CONFIG, setter("runs/base-S0/bank", "S9"), "runs.base-S0.bank"),
    "run names unknown checkpoint": Case(
        CONFIG, setter("runs/base-S0/checkpoint", "iter90"), "runs.base-S0.checkpoint"
    ),
    "run names unknown protocol": Case(
        CONFIG, setter("runs/base-S0/protocol", "nope"), "runs.base-S0.protocol"
    ),
    "experiment name reused": Case(
        CONFIG,
        setter("runs/final-ST/experiment", "qwen35-4b-test-base-free"),
        "runs.final-ST.experiment",
    ),
    "run on unknown split": Case(CONFIG, setter("runs/base-S0/split", "dev"), "runs.base-S0.split"),
    "run with unknown key": Case(CONFIG, setter("runs/base-S0/seed", 3), "runs.base-S0.seed"),
    "contrast of unknown run": Case(
        CONFIG, setter("contrasts/s0-gain/control", "nope"), "contrasts.s0-gain.control"
    ),
    "contrast of a run with itself": Case(
        CONFIG, setter("contrasts/s0-gain/control", "base-S0"), "contrasts.s0-gain.treatment"
    ),
    "contrast across splits": Case(
        CONFIG, setter("contrasts/s0-gain/control", "base-val-free"), "contrasts.s0-gain.treatment"
    ),
    "contrast across protocols": Case(CONFIG, third_protocol_contrast, "contrasts.s0-gain"),
    "too few resamples": Case(
        CONFIG, setter("statistics/n_resamples", 10), "statistics.n_resamples"
    ),
    "confidence over one": Case(
        CONFIG, setter("statistics/confidence", 1.5), "statistics.confidence"
    ),
    "ranking a non-draft bank": Case(CONFIG, setter("ranking/bank", "S0"), "ranking.bank"),
    "top-k over bank size": Case(CONFIG, setter("ranking/k", 99), "ranking.k"),
    "ranking on a skill run": Case(
        CONFIG, setter("ranking/bare_val_run", "base-S0"), "ranking.bare_val_run"
    ),
    "undeclared paper seed": Case(
        CONFIG, setter("ranking/random_seeds_in_paper", [999]), "ranking.random_seeds_in_paper"
    ),
    "matrix path missing": Case(
        CONFIG, setter("ablation/matrix", "config/ablation/nope.yaml"), "ablation.matrix"
    ),
    "unknown top-level key": Case(CONFIG, setter("worlds", {}), "worlds"),
    "missing runs section": Case(CONFIG, deleter("runs"), "runs"),
    "config syntax error": Case(
        CONFIG, lambda t: t.replace("split: test}", "split: test"), "YAML syntax", text=True
    ),
    "config tab indent": Case(
        CONFIG, lambda t: t.replace("\n  seed: 20260901", "\n\tseed: 20260901"), "tabs", text=True
    ),
    "run given twice": Case(
        CONFIG,
        lambda t: t.replace("\n  base-S0:", "\n  base-free: {}\n  base-S0:", 1),
        "base-free",
        text=True,
    ),
    "overlay concurrency": Case(
        OVERLAY,
        {"protocols": {"local-sglang": {"runtime": {"concurrency": 64}}}},
        "protocols.local-sglang.runtime.concurrency",
    ),
    "overlay unknown key": Case(OVERLAY, {"statistics": {"n_resample": 500}}, "n_resample"),
    "overlay bad reference": Case(
        OVERLAY, {"runs": {"base-S0": {"bank": "S9"}}}, "runs.base-S0.bank"
    ),
    "overlay key twice": Case(OVERLAY, "statistics:\n  seed: 1\n  seed: 2\n", "seed", text=True),
    "overlay asks too many cards": Case(
        OVERLAY,
        {"protocols": {"local-sglang": {"model_server": {"tp": 8, "dp_size": 4}}}},
        "protocols.local-sglang.model_server",
        profile="profiles/gpu-host",
    ),
    "matrix file deleted": Case(MATRIX, None, "ablation.matrix", named_file=CONFIG),
    "matrix syntax error": Case(
        MATRIX, lambda t: t.replace('values: {"1":', 'values: {"1"', 1), "YAML syntax", text=True
    ),
    "group names unknown benchmark": Case(
        MATRIX,
        setter("groups/lr/benchmarks", ["livemathematicianbench", "mmlu"]),
        "groups.lr.benchmarks.1",
    ),
    "group lists a benchmark twice": Case(
        MATRIX, setter("groups/lr/benchmarks", ["docvqa", "docvqa"]), "groups.lr.benchmarks.1"
    ),
    "harness setting temp-hot": Case(
        MATRIX,
        setter("harness/steps/harness-1/settings/SearchQA", ["temp-hot"]),
        "harness.steps.harness-1.settings.SearchQA.0",
    ),
    "harness setting lr-x": Case(
        MATRIX,
        setter("harness/steps/harness-1/settings/SearchQA", ["lrx"]),
        "harness.steps.harness-1.settings.SearchQA.0",
    ),
    "harness unknown scheduler": Case(
        MATRIX,
        setter("harness/steps/harness-1/settings/SearchQA", ["sched-step"]),
        "harness.steps.harness-1.settings.SearchQA.0",
    ),
    "mirror of unknown step": Case(
        MATRIX,
        setter("harness/steps/harness-2/mirror", "harness-9"),
        "harness.steps.harness-2.mirror",
    ),
    "unknown harness backend": Case(
        MATRIX,
        setter("harness/steps/harness-1/backend", "Gemini"),
        "harness.steps.harness-1.backend",
    ),
    "harness label unknown": Case(
        MATRIX,
        setter("harness/steps/harness-1/settings/WebShop", ["lr8"]),
        "harness.steps.harness-1.settings.WebShop",
    ),
    "harness benchmark unknown": Case(
        MATRIX,
        setter("harness/benchmarks/SearchQA/benchmark", "nq"),
        "harness.benchmarks.SearchQA.benchmark",
    ),
    "group prefix reused": Case(MATRIX, setter("groups/lr/prefix", "BATCH"), "groups.batch.prefix"),
    "group given twice": Case(
        MATRIX, lambda t: t.replace("\n  lr:\n", "\n  batch: {}\n  lr:\n", 1), "batch", text=True
    ),
    "group in unknown section": Case(
        MATRIX, setter("groups/lr/section", "9.9"), "groups.lr.section"
    ),
    "unknown trainer kind": Case(MATRIX, setter("trainer/kind", "gpu"), "trainer.kind"),
    # A git checkout, but not the trainer's: no scripts/train.py, configs or splits.
    "trainer root without its files": Case(
        MATRIX,
        lambda c: c["trainer"].update(kind="command", root=str(REPO)),
        "env.split_dir",
    ),
    "unknown matrix key": Case(MATRIX, setter("groupz", {}), "groupz"),
}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_workflow(tmp_path_factory.mktemp("bad-inputs"))


def apply(workdir: Path, case: Case) -> list[str]:
    """Write the case's files; return the extra snakemake arguments it needs."""
    path = workdir / case.target
    if case.edit is None:
        path.unlink()
    elif case.text:
        original = path.read_text() if path.exists() else ""
        path.write_text(case.edit(original) if callable(case.edit) else case.edit)
    elif isinstance(case.edit, dict):
        path.write_text(yaml.safe_dump(case.edit))
    else:
        data = yaml.safe_load(path.read_text())
        case.edit(data)
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    args = ["--configfile", OVERLAY] if case.target == OVERLAY else []
    return args + (["--profile", case.profile] if case.profile else [])


# One case for each place a refusal is made (the loader, the schema, a cross-field check,
# a file the config names, the matrix, a profile's cards) runs the dry run a user runs;
# the others make the checks that dry run makes when it parses the workflow
# (workflow.parse_checks), without starting Snakemake.
THROUGH_SNAKEMAKE = {
    "config syntax error", "seed of wrong type", "run names unknown bank",
    "checkpoint file missing", "overlay key twice", "matrix syntax error",
    "unknown trainer kind", "overlay asks too many cards", "trainer root without its files",
}  # fmt: skip


def parse_refusal(workdir: Path, args: list[str]) -> str:
    """What the workflow's parse-time checks say of the config files ``args`` name (the
    config, then an overlay given with --configfile), as rules/common.smk makes them."""
    files = [CONFIG, *args[1:]]
    with contextlib.chdir(workdir), pytest.raises(ConfigError) as refused:
        check_inputs(merged_config(files), config_sources(files))
    return str(refused.value)


@pytest.mark.parametrize("name", list(CASES))
def test_a_malformed_input_is_refused_before_any_job(workdir: Path, name: str) -> None:
    assert len(CASES) >= 50
    case = CASES[name]
    saved = {f: (workdir / f).read_text() for f in (CONFIG, MATRIX)}
    try:
        args = apply(workdir, case)
        if name in THROUGH_SNAKEMAKE or case.profile:
            done = snakemake(workdir, "-n", "paper", *args, check=False)
            output = done.stdout + done.stderr
            assert done.returncode != 0, output
            assert "Traceback" not in output, output
            assert "skilleval" in output, output
        else:
            output = parse_refusal(workdir, args)
    finally:
        for file, text in saved.items():
            (workdir / file).write_text(text)
        (workdir / OVERLAY).unlink(missing_ok=True)
    assert (case.named_file or case.target) in output, output
    assert case.key in output, output
    assert not (workdir / "results").exists(), "a refused config wrote results"
    shutil.rmtree(workdir / ".snakemake" / "log", ignore_errors=True)


# A target that names no rule, and one that names an undeclared run: one line each, the
# project's own words, none of Snakemake's exception around them.
MISTYPED_TARGETS = {
    "papr": (
        "skilleval: no rule or file 'papr' to build: did you mean paper",
        "MissingRuleException",
    ),
    "results/runs/final-St/summary.json": (
        "skilleval: the config declares no run 'final-St' (did you mean final-ST?)",
        "InputFunctionException",
    ),
}


@pytest.mark.parametrize("target", sorted(MISTYPED_TARGETS))
def test_a_mistyped_target_is_one_line_naming_the_nearest_choices(
    workdir: Path, target: str
) -> None:
    said, noise = MISTYPED_TARGETS[target]
    done = snakemake(workdir, "-n", target, check=False)
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert said in output
    assert "Traceback" not in output and noise not in output


def test_every_bad_value_of_an_overlay_is_reported_in_one_go(workdir: Path) -> None:
    overlay = workdir / OVERLAY
    overlay.write_text(
        "protocols:\n  local-sglang:\n"
        "    execution: {environment: {url: 'htp:/127.0.0.1:5700'}}\n"
        "    runtime: {max_steps: 0}\n"
        "world: {seed: x}\n"
    )
    try:
        done = snakemake(workdir, "-n", "paper", "--configfile", OVERLAY, check=False)
    finally:
        overlay.unlink()
    output = done.stdout + done.stderr
    assert done.returncode != 0 and "Traceback" not in output
    assert "3 invalid values:" in output
    for line, key in ((5, "world.seed"), (3, "environment.url"), (4, "runtime.max_steps")):
        assert f"{OVERLAY}, line {line}: " in output and key in output


@pytest.mark.parametrize(
    ("written", "said"),
    [
        (
            "protocols:\n  local-sglang: {runtime: {max_steps: 3}\n  bad: [\n",
            ", line 3, column 3: YAML syntax error",
        ),
        (None, "--configfile not found"),
    ],
    ids=["yaml syntax error", "missing"],
)
def test_an_overlay_snakemake_cannot_read_gets_one_error_naming_the_file(
    workdir: Path, written: str | None, said: str
) -> None:
    """Snakemake reads --configfile before any of the workflow's code: its own words name
    no file (a YAML error) or are open()'s traceback (a missing file); the logger plugin
    says instead what our loader says, file, line and column, with a fix."""
    overlay = workdir / "config" / "examples" / "unreadable.yaml"
    if written is not None:
        overlay.write_text(written)
    try:
        done = snakemake(workdir, "-n", "paper", "--configfile", str(overlay), check=False)
    finally:
        overlay.unlink(missing_ok=True)
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert f"skilleval: {overlay}" in output and said in output and "fix:" in output
    assert "Traceback" not in output and "not valid JSON or YAML" not in output


def test_a_second_checkout_on_one_venv_is_refused_naming_both(tmp_path: Path) -> None:
    """The venv's editable install is one checkout; a second checkout's build would have
    that one's staleness and run its code."""
    second = copy_workflow(tmp_path)
    shutil.copytree(
        REPO / "skilleval", second / "skilleval", ignore=shutil.ignore_patterns("__pycache__")
    )
    console = Path(sys.executable).with_name("snakemake")  # as a user types it: no -m
    done = subprocess.run(
        [str(console), "-n", "paper"], cwd=second, capture_output=True, text=True, timeout=300
    )
    output = done.stdout + done.stderr
    assert done.returncode != 0 and "Traceback" not in output, output
    assert f"this checkout's workflow ({second.resolve()}) imports" in output, output
    assert f"the skilleval package of another checkout ({PACKAGE_DIR})" in output
    assert f"fix: run pip install -e . in {second.resolve()}" in output


def test_a_job_importing_another_package_than_its_build_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(PACKAGE_VARIABLE, str(tmp_path / "checkout-b" / "skilleval"))
    job = SimpleNamespace(rule="eval_run", wildcards={}, input=[], output=[])
    with pytest.raises(SystemExit) as stopped, logged(str(tmp_path / "job.log"), job):
        raise AssertionError("the job must not start")
    assert stopped.value.code == 1
    said = capfd.readouterr().err
    assert f"this job imports the skilleval package at {PACKAGE_DIR}" in said
    assert f"parsed the graph with {tmp_path / 'checkout-b' / 'skilleval'}" in said
    monkeypatch.setenv(PACKAGE_VARIABLE, str(PACKAGE_DIR))
    with logged(str(tmp_path / "job.log"), job):
        pass


def test_an_external_bank_holding_other_than_its_declared_chunks_is_refused(
    workdir: Path,
) -> None:
    """A bank outside the folders the graph builds is read at parse time, before any job."""
    bank = workdir / "lab-banks" / "ST.md"
    bank.parent.mkdir(exist_ok=True)
    bank.write_text("# lab ST\n" + "".join(f"## chunk {i:02d}\n\nHint {i}.\n\n" for i in range(10)))
    overlay = workdir / OVERLAY
    overlay.write_text("banks:\n  ST: {path: lab-banks/ST.md, chunks: 12, role: final}\n")
    try:
        done = snakemake(workdir, "-n", "paper", "--configfile", OVERLAY, check=False)
        overlay.write_text("banks:\n  ST: {path: lab-banks/ST.md, chunks: 10, role: final}\n")
        accepted = snakemake(workdir, "-n", "paper", "--configfile", OVERLAY, check=False)
    finally:
        overlay.unlink()
    output = done.stdout + done.stderr
    assert done.returncode != 0 and "Traceback" not in output, output
    assert "banks.ST.chunks" in output and "the bank file lab-banks/ST.md holds 10 chunks" in output
    assert "set banks.ST.chunks: 10" in output
    assert not (workdir / "results").exists()
    assert accepted.returncode == 0, accepted.stderr
