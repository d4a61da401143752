"""A frozen protocol stays frozen: a config that changes a value reaching evidence is refused
when the workflow is parsed; addresses and timeouts may change; the same values under a new
name build, and every table names the protocol with its digest."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest
import yaml

from skilleval.config.loading import config_sources, merged_config
from skilleval.errors import ConfigError
from skilleval.records.runs import RunSummary
from skilleval.runs.inputs import protocol_digest
from skilleval.storage.hashing import file_sha256
from skilleval.workflow.as_snakemake import snakemake_config
from skilleval.workflow.frozen import check_frozen, load_registry
from tests.conftest import REPO, snakemake

REGISTRY = REPO / "config" / "frozen-protocols.yaml"
CONFIG = REPO / "config" / "config.yaml"


def check(*overlays: Path) -> None:
    files = [CONFIG, *overlays]
    config = merged_config(files)
    sources = config_sources(files)
    shipped = sources.files[0].data["protocols"]
    check_frozen(config["protocols"], shipped, load_registry(REGISTRY), sources, str(REGISTRY))


def overlay(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "overlay.yaml"
    path.write_text(text)
    return path


def test_the_shipped_protocol_has_its_registered_digest() -> None:
    registry = load_registry(REGISTRY)
    shipped = yaml.safe_load(CONFIG.read_text())["protocols"]
    assert registry["local-sglang"].digest == protocol_digest(
        "local-sglang", shipped["local-sglang"]
    )
    assert registry["local-sglang"].prompt == {
        role: file_sha256(REPO / path) for role, path in shipped["local-sglang"]["prompt"].items()
    }
    check()


def test_an_edit_of_a_frozen_protocol_s_prompt_in_place_is_refused_naming_the_file(
    tmp_path: Path,
) -> None:
    """The tables label runs local-sglang@digest: a prompt edited in place would put the
    numbers of two prompts under one label."""
    root = tmp_path / "workflow"
    shutil.copytree(REPO / "config", root / "config")
    system = root / "config" / "prompts" / "shop-assistant.system.txt"
    system.write_text(system.read_text() + "Answer briefly.\n")
    with pytest.raises(ConfigError) as refused:
        snakemake_config(root, [], None)
    said = str(refused.value)
    assert (
        "protocols.local-sglang.prompt.system = 'config/prompts/shop-assistant.system.txt'" in said
    )
    assert f"protocol local-sglang is frozen with another system prompt: {system}" in said
    assert "register the new prompt under a new protocol name" in said


def test_an_overlay_of_a_value_reaching_evidence_is_refused_naming_the_key(tmp_path: Path) -> None:
    hot = overlay(tmp_path, "protocols:\n  local-sglang:\n    sampling:\n      max_tokens: 2048\n")
    with pytest.raises(ConfigError) as refused:
        check(hot)
    message = str(refused.value)
    assert message.startswith(f"{hot}, line 4: protocols.local-sglang.sampling.max_tokens = 2048")
    assert "protocol local-sglang is frozen" in message and "new protocol name" in message


def in_execution(line: str) -> str:
    """An overlay setting ``line`` in local-sglang's execution section."""
    return f"protocols:\n  local-sglang:\n    execution:\n      {line}\n"


@pytest.mark.parametrize(
    "text",
    [
        in_execution("model_server: {base_url: 'http://127.0.0.1:30016/v1'}"),
        in_execution("model_server: {request_timeout_s: 900}"),
        in_execution("environment: {url: 'http://env-host:5700'}"),
        in_execution("outage_budget_s: 3600"),
    ],
)
def test_execution_settings_may_change(tmp_path: Path, text: str) -> None:
    check(overlay(tmp_path, text))


@pytest.mark.parametrize("example", sorted((REPO / "config" / "examples").glob("*.yaml")))
def test_the_shipped_examples_keep_the_frozen_protocol(example: Path) -> None:
    check(example)


def test_the_same_values_under_a_new_name_parse_and_are_labelled_with_their_digest(
    workflow_copy: Path,
) -> None:
    config = yaml.safe_load(CONFIG.read_text())
    renamed = copy.deepcopy(config["protocols"]["local-sglang"])
    renamed["sampling"]["max_tokens"] = 2048
    runs = {name: {"protocol": "local-2048"} for name in config["runs"]}
    text = yaml.safe_dump({"protocols": {"local-2048": renamed}, "runs": runs})
    (workflow_copy / "config" / "local-2048.yaml").write_text(text)
    planned = snakemake(workflow_copy, "-n", "paper", "--configfile", "config/local-2048.yaml")
    assert "eval_run" in planned.stdout
    digest = protocol_digest("local-2048", renamed)
    assert digest != load_registry(REGISTRY)["local-sglang"].digest
    summary = RunSummary.model_construct(protocol="local-2048", protocol_fingerprint=digest)
    assert summary.protocol_label == f"local-2048@{digest[:12]}"


def test_the_workflow_refuses_a_frozen_protocol_s_overlay_before_any_work(
    workflow_copy: Path,
) -> None:
    (workflow_copy / "config" / "hot.yaml").write_text(
        "protocols:\n  local-sglang:\n    sampling:\n      temperature: 0.7\n"
    )
    done = snakemake(workflow_copy, "-n", "paper", "--configfile", "config/hot.yaml", check=False)
    assert done.returncode != 0
    assert "protocols.local-sglang.sampling.temperature = 0.7" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (workflow_copy / "results").exists()
