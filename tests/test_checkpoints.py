"""Real checkpoint layouts: bf16/fp16/fp32/fp8 shards in the Hugging Face layout.

Checkpoints are written with safetensors.numpy, the bf16 and fp8 values by ml_dtypes (the
dtype library JAX uses), and every reference value is computed in float64 from ml_dtypes'
conversions, independently of skilleval's reader, which decodes the bits itself.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import save_file

from skilleval.checkpoints.audit import audit_checkpoint
from skilleval.checkpoints.diff import weight_diff
from skilleval.checkpoints.files import checkpoint_fingerprint
from skilleval.checkpoints.layout import read_header, resolve_weights
from skilleval.checkpoints.tensors import chunks, read_tensor
from skilleval.cli import main
from skilleval.errors import CheckpointError

DTYPES: dict[str, type] = {"BF16": ml_dtypes.bfloat16, "F16": np.float16, "F32": np.float32}
SHAPES = {
    "model.embed_tokens.weight": (64, 16),
    "model.layers.0.self_attn.q_proj.weight": (16, 16),
    "model.layers.0.mlp.up_proj.weight": (32, 16),
    "model.layers.1.self_attn.q_proj.weight": (16, 16),
    "model.layers.1.mlp.up_proj.weight": (32, 16),
    "model.norm.weight": (16,),
}


def model_tensors(seed: int, step: float) -> dict[str, np.ndarray]:
    """Base weights (seed 0) moved by `step` times a seeded perturbation, later layers more."""
    base = np.random.default_rng(0)
    move = np.random.default_rng(seed)
    tensors = {}
    for i, (name, shape) in enumerate(SHAPES.items()):
        weights = base.standard_normal(shape)
        tensors[name] = weights + step * (i + 1) * move.standard_normal(shape)
    return tensors


def write_hf(folder: Path, tensors: dict[str, np.ndarray], dtype: type) -> Path:
    """Two shards and an index, as `save_pretrained` lays a model out."""
    folder.mkdir(parents=True)
    names = sorted(tensors)
    weight_map = {}
    for i, part in enumerate((names[::2], names[1::2])):
        shard = f"model-{i + 1:05d}-of-00002.safetensors"
        save_file({n: tensors[n].astype(dtype) for n in part}, str(folder / shard))
        weight_map.update(dict.fromkeys(part, shard))
    index = folder / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))
    return index


@pytest.mark.parametrize("dtype", DTYPES)
def test_audit_and_diff_of_two_hf_checkpoints(tmp_path: Path, dtype: str) -> None:
    base, final = model_tensors(1, 0.0), model_tensors(1, 0.01)
    write_hf(tmp_path / "base", base, DTYPES[dtype])
    write_hf(tmp_path / "final", final, DTYPES[dtype])
    audit = audit_checkpoint("base", str(tmp_path / "base"))
    assert audit["passed"], audit["problems"]
    assert audit["dtypes"] == {dtype: len(SHAPES)}
    assert audit["parameter_count"] == sum(math.prod(s) for s in SHAPES.values())
    assert sorted(audit["shard_bytes"]) == audit["shards"] and len(audit["shards"]) == 2
    assert all(size > 0 for size in audit["shard_bytes"].values())

    diff = weight_diff(str(tmp_path / "base"), str(tmp_path / "final"), device="cpu")
    assert diff["device"] == "cpu" and len(diff["tensors"]) == len(SHAPES)
    for row in diff["tensors"]:
        a = base[row["tensor"]].astype(DTYPES[dtype]).astype(np.float64)
        b = final[row["tensor"]].astype(DTYPES[dtype]).astype(np.float64)
        reference = float(np.linalg.norm(b - a) / np.linalg.norm(a))
        assert reference > 0
        assert abs(row["relative_l2"] - reference) / reference < 1e-3, row


@pytest.mark.parametrize(
    "dtype", ["BF16", "F16", "F32", "F64", "F8_E4M3", "F8_E5M2", "I8", "I64", "BOOL"]
)
def test_every_dtype_widens_exactly(tmp_path: Path, dtype: str) -> None:
    numpy_dtype = {
        **DTYPES,
        "F64": np.float64,
        "F8_E4M3": ml_dtypes.float8_e4m3fn,
        "F8_E5M2": ml_dtypes.float8_e5m2,
        "I8": np.int8,
        "I64": np.int64,
        "BOOL": np.bool_,
    }[dtype]
    if dtype.startswith("F8"):
        # every one of the 256 codes, NaN included
        values = np.arange(256, dtype=np.uint8).view(numpy_dtype)
    else:
        values = (np.random.default_rng(3).standard_normal(1000) * 50).astype(numpy_dtype)
    save_file({"t": values}, str(tmp_path / "one.safetensors"))
    entry = read_header(tmp_path / "one.safetensors")["t"]
    assert entry.dtype == dtype
    ours = read_tensor(tmp_path / "one.safetensors", entry)
    with np.errstate(invalid="ignore"):  # the fp8 NaN codes widen to NaN, as they should
        np.testing.assert_array_equal(ours.astype(np.float64), values.astype(np.float64))


def test_chunks_are_bounded_and_cover_the_tensor(tmp_path: Path) -> None:
    values = np.arange(1000, dtype=np.float32).astype(ml_dtypes.bfloat16)
    save_file({"t": values}, str(tmp_path / "one.safetensors"))
    entry = read_header(tmp_path / "one.safetensors")["t"]
    parts = list(chunks(tmp_path / "one.safetensors", entry, elements=64))
    assert max(len(p) for p in parts) == 64 and len(parts) == 16
    np.testing.assert_array_equal(np.concatenate(parts), values.astype(np.float32))


def test_a_checkpoint_registers_as_directory_index_or_single_file(tmp_path: Path) -> None:
    index = write_hf(tmp_path / "hf", model_tensors(1, 0.0), ml_dtypes.bfloat16)
    assert resolve_weights(tmp_path / "hf") == index
    assert checkpoint_fingerprint(tmp_path / "hf") == checkpoint_fingerprint(index)
    save_file({"w": np.ones(3, np.float32)}, str(tmp_path / "single.safetensors"))
    single = audit_checkpoint("s", str(tmp_path / "single.safetensors"))
    assert single["passed"] and single["shards"] == ["single.safetensors"]
    (tmp_path / "two").mkdir()
    for name in ("a", "b"):
        save_file({"w": np.ones(3, np.float32)}, str(tmp_path / "two" / f"{name}.safetensors"))
    with pytest.raises(CheckpointError, match="cannot tell which file"):
        resolve_weights(tmp_path / "two")


def broken_variants(folder: Path) -> dict[str, str]:
    """How each breakage must be named in the audit."""
    shard1, shard2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
    return {
        "deleted shard": f"{shard2}: shard is missing",
        "truncated shard": f"{shard1}: truncated",
        "index names a missing tensor": "model.layers.9.mlp.gate_proj.weight: the index places "
        f"it in {shard1}",
        "header does not parse": f"{shard1}: header does not parse",
        "extra shard": "model-00003-of-00002.safetensors: shard is not in the index",
    }


def break_checkpoint(folder: Path, how: str) -> None:
    shard1, shard2 = (
        folder / "model-00001-of-00002.safetensors",
        folder / "model-00002-of-00002.safetensors",
    )
    index = folder / "model.safetensors.index.json"
    if how == "deleted shard":
        shard2.unlink()
    elif how == "truncated shard":
        shard1.write_bytes(shard1.read_bytes()[:-100])
    elif how == "index names a missing tensor":
        data = json.loads(index.read_text())
        data["weight_map"]["model.layers.9.mlp.gate_proj.weight"] = shard1.name
        index.write_text(json.dumps(data))
    elif how == "header does not parse":
        raw = bytearray(shard1.read_bytes())
        raw[8:12] = b"\xff\xfe{]"
        shard1.write_bytes(bytes(raw))
    elif how == "extra shard":
        (folder / "model-00003-of-00002.safetensors").write_bytes(shard2.read_bytes())


@pytest.mark.parametrize("how", list(broken_variants(Path())))
def test_a_broken_checkpoint_is_reported_by_name(
    tmp_path: Path, how: str, capsys: pytest.CaptureFixture[str]
) -> None:
    write_hf(tmp_path / "ck", model_tensors(1, 0.0), ml_dtypes.bfloat16)
    break_checkpoint(tmp_path / "ck", how)
    audit = audit_checkpoint("ck", str(tmp_path / "ck"))
    assert not audit["passed"] and audit["fingerprint"] is None
    expected = broken_variants(tmp_path / "ck")[how]
    assert any(expected in problem for problem in audit["problems"]), audit["problems"]
    assert main(["checkpoint", "audit", str(tmp_path / "ck")]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == len(audit["problems"]) and any(expected in line for line in out)
    with pytest.raises(CheckpointError) as refused:
        weight_diff(str(tmp_path / "ck"), str(tmp_path / "ck"))
    assert expected in str(refused.value)


def test_checkpoint_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_hf(tmp_path / "base", model_tensors(1, 0.0), ml_dtypes.bfloat16)
    write_hf(tmp_path / "final", model_tensors(1, 0.02), ml_dtypes.bfloat16)
    assert main(["checkpoint", "audit", str(tmp_path / "base")]) == 0
    assert "passed; 2 shard(s)" in capsys.readouterr().out
    assert (
        main(["checkpoint", "diff", str(tmp_path / "base"), str(tmp_path / "final"), "--json"]) == 0
    )
    diff = json.loads(capsys.readouterr().out)
    assert {r["tensor"] for r in diff["tensors"]} == set(SHAPES)
    assert (
        main(["checkpoint", "diff", str(tmp_path / "base"), str(tmp_path / "final"), "--top", "2"])
        == 0
    )
    text = capsys.readouterr().out.splitlines()
    base, final = model_tensors(1, 0.0), model_tensors(1, 0.02)

    def moved(name: str) -> float:
        a = base[name].astype(ml_dtypes.bfloat16).astype(np.float64)
        b = final[name].astype(ml_dtypes.bfloat16).astype(np.float64)
        return float(np.linalg.norm(b - a) / np.linalg.norm(a))

    assert len(text) == 3 and max(SHAPES, key=moved) in text[1]  # the top mover first


@pytest.mark.gpu
def test_the_gpu_and_cpu_paths_agree(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch", reason="the GPU path needs the [gpu] extra")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    write_hf(tmp_path / "base", model_tensors(1, 0.0), ml_dtypes.bfloat16)
    write_hf(tmp_path / "final", model_tensors(1, 0.01), ml_dtypes.bfloat16)
    cpu = weight_diff(str(tmp_path / "base"), str(tmp_path / "final"), device="cpu")
    gpu = weight_diff(str(tmp_path / "base"), str(tmp_path / "final"), device="cuda")
    assert gpu["device"] == "cuda"
    for a, b in zip(cpu["tensors"], gpu["tensors"], strict=True):
        assert a["tensor"] == b["tensor"]
        assert abs(a["relative_l2"] - b["relative_l2"]) <= 1e-9 * a["relative_l2"]
