from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from skilleval.config.checks import validate_config
from skilleval.config.input_files import declared_files
from skilleval.config.loading import (
    config_sources,
    in_declared_order,
    load_config_file,
    merged_config,
)
from skilleval.config.schema import load_schema
from skilleval.errors import ConfigError, ConfigErrors
from tests.conftest import REPO, load_default_config, plan_of, snakemake


def invalid(mutate: Any) -> ConfigError:
    config = copy.deepcopy(load_default_config())
    mutate(config)
    with pytest.raises(ConfigError) as info:
        validate_config(config, "config/config.yaml")
    return info.value


def test_default_config_is_valid() -> None:
    validate_config(load_default_config(), "config/config.yaml")


def test_the_real_path_example_is_a_valid_overlay() -> None:
    files = ["config/config.yaml", "config/examples/real-path.yaml"]
    config = merged_config(REPO / f for f in files)
    validate_config(config, config_sources(REPO / f for f in files))
    assert config["backends"] == {
        "policy": "openai",
        "environment": "http",
        "model_server": "process",
    }
    named = dict(declared_files(config))
    assert named["checkpoints.base.path"].endswith("model.safetensors.index.json")
    assert all(named[f"banks.{b}.path"].startswith("/data/") for b in ("S0", "ST", "draft16"))


@pytest.mark.parametrize("name", ["config", "ablation"])
def test_every_schema_key_has_a_description(name: str) -> None:
    schema = load_schema(name)
    missing = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            typed = any(k in node for k in ("type", "enum", "const"))
            if typed and "description" not in node:
                missing.append(path)
            if node.get("type") == "object" and "additionalProperties" not in node:
                missing.append(f"{path} (no additionalProperties)")
            for key, value in node.get("properties", {}).items():
                walk(value, f"{path}.{key}")
            for key, value in node.get("$defs", {}).items():
                walk(value, f"$defs.{key}")
            if isinstance(node.get("additionalProperties"), dict):
                walk(node["additionalProperties"], f"{path}.*")

    walk(schema, "")
    assert missing == []


@pytest.mark.parametrize(
    ("mutate", "key", "value", "fix"),
    [
        (
            lambda c: c["runs"]["base-S0"].update(bank="S9"),
            "runs.base-S0.bank",
            "S9",
            "use one of S0, ST, draft16",
        ),
        (
            lambda c: c["protocols"]["local-sglang"]["runtime"].update(max_skills=4),
            "protocols.local-sglang.runtime.max_skills",
            4,
            "null",
        ),
        (
            lambda c: c["protocols"]["local-sglang"]["sampling"].update(temprature=0.6),
            "protocols.local-sglang.sampling.temprature",
            0.6,
            "temperature",
        ),
        (
            lambda c: c["runs"]["final-ST"].update(checkpoint="iter90"),
            "runs.final-ST.checkpoint",
            "iter90",
            "base, final",
        ),
        (
            lambda c: c["protocols"]["local-sglang"]["runtime"].update(concurrency=64),
            "protocols.local-sglang.runtime.concurrency",
            64,
            "at most 48",
        ),
        (
            lambda c: c["runs"]["final-ST"].update(experiment="qwen35-4b-test-base-free"),
            "runs.final-ST.experiment",
            "qwen35-4b-test-base-free",
            "its own experiment name",
        ),
        (
            lambda c: c["checkpoints"]["final"].update(checkpoint_id="qwen35-4b-base-hf"),
            "checkpoints.final.checkpoint_id",
            "qwen35-4b-base-hf",
            "checkpoint_id",
        ),
        (
            lambda c: c["contrasts"]["s0-gain"].update(control="base-S0"),
            "contrasts.s0-gain.treatment",
            "base-S0",
            "two different runs",
        ),
        (
            lambda c: c["banks"]["ST"].update(path="banks/st.txt"),
            "banks.ST.path",
            "banks/st.txt",
            "markdown",
        ),
    ],
)
def test_errors_name_file_key_value_and_fix(mutate: Any, key: str, value: object, fix: str) -> None:
    error = invalid(mutate)
    assert error.file == "config/config.yaml"
    assert error.key == key
    assert error.value == value
    assert fix in error.fix or fix in str(error)


def test_mixing_protocols_in_a_contrast_is_refused() -> None:
    def mutate(c: dict[str, Any]) -> None:
        c["runs"]["base-S0"]["protocol"] = "hosted-api"

    error = invalid(mutate)
    assert error.key == "contrasts.s0-gain"
    assert "never be mixed" in str(error)
    # Every contrast that mixes them is named at once, not one per attempt.
    assert isinstance(error, ConfigErrors)
    named = {e.key for e in error.errors}
    expected = {
        f"contrasts.{name}"
        for name, c in load_default_config()["contrasts"].items()
        if "base-S0" in (c["control"], c["treatment"])
    }
    assert named == expected and len(expected) >= 2, named


def test_bad_config_stops_dry_run_without_traceback(workflow_copy: Path) -> None:
    config_path = workflow_copy / "config" / "config.yaml"
    config_path.write_text(
        config_path.read_text().replace("temperature: 0.6", "temperature: -1", 1)
    )
    done = snakemake(workflow_copy, "-n", check=False)
    output = done.stdout + done.stderr
    assert done.returncode != 0
    line = 1 + config_path.read_text().splitlines().index("      temperature: -1")
    assert (
        f"config/config.yaml, line {line}: protocols.local-sglang.sampling.temperature = -1"
        in output
    )
    assert "fix:" in output
    assert "Traceback" not in output


def test_a_key_given_twice_is_refused_naming_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text("runs:\n  base-S0: {bank: S0}\n  other: {}\n  base-S0: {bank: ST}\n")
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    message = str(info.value)
    assert str(path) in message and "base-S0" in message and "lines 2 and 4" in message
    assert "runs.base-S0 = 'lines 2 and 4'" in message  # the full key path


def test_a_nested_duplicate_key_is_named_by_its_full_path(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text("statistics:\n  n_resamples: 100\n  seed: 1\n  seed: 2\n")
    with pytest.raises(ConfigError, match=r"statistics\.seed = 'lines 3 and 4'"):
        load_config_file(path)


def test_a_key_without_its_colon_is_reported_at_its_own_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("statistics:\n  n_resamples: 100\n  seed 1\n  method: percentile\n")
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    message = str(info.value)
    assert f"{path}, line 3, column 3: YAML syntax error" in message
    assert "\n    seed 1\n" in message  # the wrong line itself, under the message


def test_a_typo_in_a_target_names_the_declared_choices(workflow_copy: Path) -> None:
    cases = {
        "results/runs/final-st/summary.json": "no run 'final-st' (did you mean final-ST?)",
        "results/contrasts/s0gain.json": "no contrast 's0gain' (did you mean s0-gain?)",
        "results/ablation/docvq/LR-docvqa-8/summary.json": (
            "the ablation matrix declares no benchmark 'docvq' (did you mean docvqa?)"
        ),
        "results/ablation/docvqa/LR-docvqa-99/summary.json": "no ablation run 'LR-docvqa-99'",
    }
    for target, expected in cases.items():
        done = snakemake(workflow_copy, "-n", target, check=False)
        output = done.stdout + done.stderr
        assert done.returncode != 0 and expected in output, (target, output[-2000:])
        assert "MissingRuleException" not in output
    # A declared run is still planned by its own rule.
    assert "eval_run" in snakemake(workflow_copy, "-n", "results/runs/final-ST/summary.json").stdout


def test_compare_with_an_unknown_run_names_the_config_s_runs(workflow_copy: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "skilleval.cli", "compare", "results/runs/base-free",
         "results/runs/base-s0", "--root", str(workflow_copy)],
        cwd=workflow_copy, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert "declares no run 'base-s0' (did you mean base-S0?)" in done.stderr
    assert "snakemake --cores 1" not in done.stderr


def test_snakemake_stops_on_a_duplicate_run_in_config(workflow_copy: Path) -> None:
    config = workflow_copy / "config" / "config.yaml"
    text = config.read_text()
    start = text.index("  base-S0:")
    end = text.index("\n  ", start + 1)
    line = text[start : end + 1]
    config.write_text(text.replace(line, line + line, 1))
    done = snakemake(workflow_copy, "-n", "paper", check=False)
    assert done.returncode != 0
    assert "base-S0" in done.stderr + done.stdout and "given twice" in done.stderr + done.stdout


def registered(chunk_ids: list[str], seed: int = 20260907) -> Any:
    entry = {"seed": seed, "chunk_ids": chunk_ids, "drawn_by": "lab script", "note": "memo 000"}
    return lambda c: c["ranking"].update(registered_random_banks=[entry])


def test_a_registered_random_bank_is_planned_as_listed() -> None:

    config = copy.deepcopy(load_default_config())
    listed = ["draft16-02", "draft16-09", "draft16-14", "draft16-05"]
    registered(listed)(config)
    validate_config(config, "config/config.yaml")
    plan = plan_of(config)
    arm = plan.arms["random-4-20260907"]
    assert arm.registered is not None and list(arm.registered.chunk_ids) == listed
    assert arm.as_json()["registered"]["chunk_ids"] == listed
    assert "registered" in arm.label
    assert plan.arms["random-4-20260908"].registered is None
    assert "drawn" in plan.arms["random-4-20260908"].label


@pytest.mark.parametrize(
    ("mutate", "key", "value", "message"),
    [
        (
            registered(["draft16-02", "draft16-09", "draft16-14", "draft16-99"]),
            "ranking.registered_random_banks[0].chunk_ids",
            "draft16-99",
            "draft16-01",
        ),
        (
            registered(["draft16-02", "draft16-09", "draft16-14"]),
            "ranking.registered_random_banks[0].chunk_ids",
            ["draft16-02", "draft16-09", "draft16-14"],
            "ranking.k is 4",
        ),
        (
            registered(["draft16-02", "draft16-09", "draft16-14", "draft16-05"], seed=7),
            "ranking.registered_random_banks[0].seed",
            7,
            "random_seeds",
        ),
    ],
)
def test_a_registered_bank_that_is_not_k_chunks_of_the_draft_bank_is_refused(
    mutate: Any, key: str, value: object, message: str
) -> None:
    error = invalid(mutate)
    assert (error.key, error.value) == (key, value)
    assert message in str(error)


def test_every_bad_value_of_a_config_is_reported_at_once() -> None:
    config = load_default_config()
    protocol = config["protocols"]["local-sglang"]
    protocol["execution"]["environment"]["url"] = "htp:/127.0.0.1:5700"
    protocol["runtime"]["max_steps"] = 0
    config["world"]["seed"] = "x"
    with pytest.raises(ConfigErrors) as raised:
        validate_config(config, "config/config.yaml")
    message = str(raised.value)
    assert message.startswith("3 invalid values:")
    keys = ("protocols.local-sglang.execution.environment.url", "runtime.max_steps", "world.seed")
    for key in keys:
        assert key in message
    assert raised.value.key == "world.seed"  # the first, for callers that name one


def test_a_long_list_of_bad_values_is_capped_with_a_count() -> None:
    config = load_default_config()
    for protocol in config["protocols"].values():
        for key in ("temperature", "top_p", "top_k", "max_tokens"):
            protocol["sampling"][key] = "x"
        for key in ("max_steps", "concurrency"):
            protocol["runtime"][key] = "x"
    with pytest.raises(ConfigErrors) as raised:
        validate_config(config, "config/config.yaml")
    assert len(raised.value.errors) == 12
    assert str(raised.value).endswith("... and 2 more")


def test_an_overlay_s_new_keys_follow_the_default_s_as_the_files_declare_them(
    tmp_path: Path,
) -> None:
    """Snakemake starts its config from the overlays and merges the default config into
    it (snakemake/workflow.py, Workflow.configfile), so an overlay's keys come first; the
    workflow restores the files' order: the default's keys, then the overlay's new ones."""
    from snakemake.utils import update_config

    overlay = tmp_path / "overlay.yaml"
    overlay.write_text("contrasts:\n  new-one: {control: a, treatment: b}\n  s0-gain: {}\n")
    default = load_config_file(REPO / "config" / "config.yaml")
    snakemake_config = yaml.safe_load(overlay.read_text())
    update_config(snakemake_config, copy.deepcopy(default))
    update_config(snakemake_config, yaml.safe_load(overlay.read_text()))
    assert next(iter(snakemake_config["contrasts"])) == "new-one"
    sources = config_sources([REPO / "config" / "config.yaml", overlay])
    ordered = in_declared_order(snakemake_config, sources)
    assert list(ordered["contrasts"]) == [*default["contrasts"], "new-one"]
    assert list(ordered) == list(default)
    assert ordered == snakemake_config


@pytest.mark.parametrize(
    ("model_server", "key"),
    [
        ("external", "protocols.local-sglang.execution.model_server.base_url"),
        ("process", None),
    ],
)
def test_a_loopback_address_another_node_cannot_reach_is_refused_naming_the_key(
    model_server: str, key: str | None
) -> None:
    """On cluster nodes a run's job may land on any node: a server it only connects to
    must be at a routable address; one it launches is on its own node, where loopback is
    right."""
    config = load_default_config()
    config["backends"].update(
        policy="openai", environment="http", model_server=model_server, jobs_run_on="cluster_nodes"
    )
    execution = config["protocols"]["local-sglang"]["execution"]
    execution["environment"].update(url="http://10.0.0.5:5700")
    execution["model_server"]["base_url"] = "http://127.0.0.1:30000/v1"
    if key is None:
        validate_config(config, "config/config.yaml")
        return
    with pytest.raises(ConfigError) as refused:
        validate_config(config, "config/config.yaml")
    assert key in str(refused.value) and "each node's own loopback" in str(refused.value)
