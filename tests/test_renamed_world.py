"""The default world generates whatever the config registers: renamed checkpoints and
banks and a third checkpoint build the whole paper, and nothing refers to the old names."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from skilleval import paths
from tests.conftest import REPO, copy_workflow, snakemake

CHECKPOINTS = """  start:
    checkpoint_id: qwen35-4b-base-hf
    path: results/world/checkpoints/start/model.safetensors
    fingerprint: null
  iter40:
    checkpoint_id: qwen35-4b-iter40
    path: results/world/checkpoints/iter40/model.safetensors
    fingerprint: null
  iter80:
    checkpoint_id: qwen35-4b-iter80
    path: results/world/checkpoints/iter80/model.safetensors
    fingerprint: null
"""
BANKS = {"S0": "B0", "ST": "BT", "draft16": "drafts"}


def renamed(config: str) -> str:
    start, end = config.index("checkpoints:\n") + len("checkpoints:\n"), config.index("\nbanks:")
    config = config[:start] + CHECKPOINTS + config[end:]
    config = re.sub(r"checkpoint: base\b", "checkpoint: start", config)
    config = re.sub(r"checkpoint: final\b", "checkpoint: iter80", config)
    for old, new in BANKS.items():
        config = config.replace(
            f"  {old}: {{path: results/world/banks/{old}.md",
            f"  {new}: {{path: results/world/banks/{new}.md",
        )
        config = re.sub(rf"bank: {old}\b", f"bank: {new}", config)
    return config


@pytest.mark.slow
def test_renamed_checkpoints_and_banks_and_a_third_checkpoint_build_the_paper(
    tmp_path: Path,
) -> None:
    workdir = copy_workflow(tmp_path)
    shutil.copy(REPO / "tests" / "data" / "small.yaml", workdir / "config" / "small.yaml")
    shutil.copy(workdir / "config/ablation/matrix.yaml", workdir / "config/ablation/planted.yaml")
    config = workdir / "config" / "config.yaml"
    config.write_text(renamed(config.read_text()))
    snakemake(workdir, "paper", "-j", "2", "--configfile", "config/small.yaml")
    world = workdir / "results" / "world"
    assert sorted(p.name for p in (world / "checkpoints").iterdir()) == [
        "iter40",
        "iter80",
        "start",
    ]
    assert sorted(p.stem for p in (world / "banks").iterdir()) == ["B0", "BT", "drafts"]
    diff = json.loads((workdir / paths.WEIGHT_DIFF).read_text())
    assert diff["checkpoints"] == ["start", "iter80"]
    assert (workdir / "paper" / "tables").is_dir()
    # the middle checkpoint lies between the two others
    from skilleval.checkpoints.tensors import load_policy_tensors

    logits = {
        name: float(
            load_policy_tensors(world / "checkpoints" / name / "model.safetensors")[
                "policy.decision_logits"
            ][0]
        )
        for name in ("start", "iter40", "iter80")
    }
    assert logits["start"] < logits["iter40"] < logits["iter80"]
