from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

from skilleval.analysis.contrast import RunRecords, validity_checks
from skilleval.analysis.verdict import verdict_of
from skilleval.checkpoints.audit import audit_checkpoint, write_audit
from skilleval.checkpoints.diff import weight_diff
from skilleval.runs.evaluation import evaluate
from tests.conftest import run_inputs


def write_sharded(source: Path, target: Path, shards: int = 4) -> Path:
    """The single-file sim checkpoint re-laid out as a multi-shard HF checkpoint."""
    tensors = load_file(str(source))
    names = sorted(tensors)
    weight_map = {}
    target.mkdir(parents=True)
    for i in range(shards):
        shard = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = {k: tensors[k] for k in names[i::shards]}
        save_file(part, str(target / shard))
        weight_map.update(dict.fromkeys(part, shard))
    index = target / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return index


def test_audit_of_a_sharded_checkpoint_and_a_missing_shard(
    small_world: Path, tmp_path: Path
) -> None:
    index = write_sharded(small_world / "checkpoints/base/model.safetensors", tmp_path / "ck")
    ok = audit_checkpoint("ck", str(index))
    assert ok["passed"] and ok["tensor_count"] == 14 and ok["parameter_count"] > 0
    assert ok["dtypes"] == {"F32": 14} and len(ok["shards"]) == 4
    (tmp_path / "ck" / "model-00004-of-00004.safetensors").unlink()
    broken = audit_checkpoint("ck", str(index))
    assert not broken["passed"]
    assert broken["missing_shards"] == ["model-00004-of-00004.safetensors"]
    assert "model-00004-of-00004.safetensors" in broken["checks"][0]["detail"]


def test_runs_on_a_checkpoint_that_lost_a_shard_are_invalid(
    small_world: Path, tmp_path: Path
) -> None:
    index = write_sharded(small_world / "checkpoints/base/model.safetensors", tmp_path / "ck")
    for run in ("base-free", "base-S0"):
        inputs = replace(run_inputs(small_world, run), checkpoint_path=str(index))
        evaluate(
            inputs,
            str(tmp_path / run / "results.jsonl"),
            str(tmp_path / run / "summary.json"),
            str(tmp_path / "journal"),
        )
    write_audit("ck", str(index), str(tmp_path / "audit-ok.json"))
    control, treatment = (
        RunRecords.in_directory(str(tmp_path / "base-free")),
        RunRecords.in_directory(str(tmp_path / "base-S0")),
    )
    good = validity_checks(control, treatment, [str(tmp_path / "audit-ok.json")] * 2)
    assert all(c.passed for c in good)
    (tmp_path / "ck" / "model-00004-of-00004.safetensors").unlink()
    write_audit("ck", str(index), str(tmp_path / "audit-bad.json"))
    checks = validity_checks(control, treatment, [str(tmp_path / "audit-bad.json")] * 2)
    failed = {c.name: c.detail for c in checks if not c.passed}
    assert set(failed) == {"checkpoint_audit_control", "checkpoint_audit_treatment"}
    assert "model-00004-of-00004.safetensors" in failed["checkpoint_audit_control"]
    verdict = verdict_of(
        {
            "name": "x",
            "causal": True,
            "checks": [c.as_json() for c in checks],
            "estimate": 0.1,
            "ci_low": 0.05,
            "ci_high": 0.2,
            "confidence": 0.95,
        }
    )
    assert verdict["verdict"] == "invalid" and "model-00004" in verdict["reason"]


def test_weight_diff_streams_shared_tensors(small_world: Path, tmp_path: Path) -> None:
    index = write_sharded(small_world / "checkpoints/base/model.safetensors", tmp_path / "ck")
    final = small_world / "checkpoints/final/model.safetensors"
    diff = weight_diff(str(index), str(final))
    by_layer = {r["tensor"]: r for r in diff["tensors"]}
    assert len(by_layer) == 14 and not diff["only_in_base"]
    early = by_layer["model.layers.0.mlp.up_proj.weight"]["relative_l2"]
    late = by_layer["model.layers.5.mlp.up_proj.weight"]["relative_l2"]
    assert 0 < early < late  # the sim training moved later layers more
    same = weight_diff(str(index), str(small_world / "checkpoints/base/model.safetensors"))
    assert all(r["relative_l2"] == 0 for r in same["tensors"])
    assert np.isfinite([r["relative_l2"] for r in diff["tensors"]]).all()
