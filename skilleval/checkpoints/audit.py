"""Checkpoint audits: every shard present and readable, what it holds, its fingerprint;
and where training changed the model (relative L2 change per tensor, streamed).

Shards are read one tensor at a time through safetensors' lazy loader, so a 4B model
is never in memory at once. The change is computed on a GPU when torch sees one.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import safe_open

from skilleval.checkpoints.files import checkpoint_fingerprint, file_fingerprint
from skilleval.checkpoints.records import CheckpointAudit
from skilleval.provenance.record import provenance
from skilleval.report.figures import save_figure
from skilleval.storage.records import Check, write_record


def shard_names(weights: Path) -> list[str]:
    if weights.name.endswith(".index.json"):
        index = json.loads(weights.read_text())
        return sorted(set(index.get("weight_map", {}).values()))
    return [weights.name]


def audit_checkpoint(checkpoint_id: str, weights: str, full_hash: bool = False) -> dict[str, Any]:
    path = Path(weights)
    tensors = parameters = 0
    dtypes: Counter[str] = Counter()
    missing, unreadable = [], []
    if not path.exists():
        missing.append(path.name)
        names: list[str] = []
    else:
        names = shard_names(path)
    for name in names:
        shard = path.parent / name
        if not shard.exists():
            missing.append(name)
            continue
        try:
            with safe_open(str(shard), framework="numpy") as handle:
                for key in handle.keys():  # noqa: SIM118 (safe_open has no __iter__)
                    info = handle.get_slice(key)
                    tensors += 1
                    dtypes[str(info.get_dtype())] += 1
                    parameters += math.prod(info.get_shape())
        except Exception as error:  # safetensors raises several error types on bad files
            unreadable.append(f"{name}: {error}")
    checks = [
        Check(
            "all_shards_present",
            not missing,
            f"missing: {missing}" if missing else f"{len(names)} shard(s)",
        ),
        Check("all_shards_readable", not unreadable, "; ".join(unreadable) or "headers parse"),
    ]
    passed = not missing and not unreadable
    fingerprint = None
    if passed:
        fingerprint = (
            checkpoint_fingerprint(path)
            if not full_hash
            else "|".join(file_fingerprint(path.parent / n, full=True) for n in names)
        )
    return {
        "checkpoint_id": checkpoint_id,
        "weights": str(path),
        "passed": passed,
        "checks": [c.as_json() for c in checks],
        "shards": names,
        "missing_shards": missing,
        "tensor_count": tensors,
        "parameter_count": parameters,
        "dtypes": dict(dtypes),
        "fingerprint": fingerprint,
        "fingerprint_method": "full sha256" if full_hash else "header + sampled blocks",
    }


def write_audit(checkpoint_id: str, weights: str, output: str, full_hash: bool = False) -> None:
    audit = audit_checkpoint(checkpoint_id, weights, full_hash)
    CheckpointAudit.create(**audit, provenance=provenance()).write(output)


def _tensor_index(weights: Path) -> dict[str, Path]:
    if weights.name.endswith(".index.json"):
        index = json.loads(weights.read_text())
        return {k: weights.parent / v for k, v in index["weight_map"].items()}
    with safe_open(str(weights), framework="numpy") as handle:
        return dict.fromkeys(handle.keys(), weights)


def relative_change(a: np.ndarray, b: np.ndarray) -> float:
    try:
        import torch

        if torch.cuda.is_available():
            ta = torch.from_numpy(np.ascontiguousarray(a)).cuda().float()
            tb = torch.from_numpy(np.ascontiguousarray(b)).cuda().float()
            return float(
                torch.linalg.vector_norm(tb - ta) / torch.linalg.vector_norm(ta).clamp_min(1e-12)
            )
    except ImportError:
        pass
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return float(np.linalg.norm(b64 - a64)) / max(float(np.linalg.norm(a64)), 1e-12)


def weight_diff(base: str, final: str) -> dict[str, Any]:
    """Relative L2 change of every tensor both checkpoints share, one tensor at a time."""
    index_a, index_b = _tensor_index(Path(base)), _tensor_index(Path(final))
    rows: list[dict[str, Any]] = []
    for key in sorted(set(index_a) & set(index_b)):
        with (
            safe_open(str(index_a[key]), framework="numpy") as fa,
            safe_open(str(index_b[key]), framework="numpy") as fb,
        ):
            a, b = fa.get_tensor(key), fb.get_tensor(key)
        if a.shape != b.shape:
            rows.append(
                {"tensor": key, "relative_l2": None, "note": f"shape {a.shape} -> {b.shape}"}
            )
            continue
        layer = re.search(r"layers\.(\d+)\.", key)
        rows.append(
            {
                "tensor": key,
                "layer": int(layer.group(1)) if layer else None,
                "relative_l2": relative_change(a, b),
            }
        )
    return {
        "base": base,
        "final": final,
        "tensors": rows,
        "only_in_base": sorted(set(index_a) - set(index_b)),
        "only_in_final": sorted(set(index_b) - set(index_a)),
    }


def weight_change_figure(diff: dict[str, Any], out_pdf: str, out_png: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_layer: dict[int, list[float]] = {}
    for row in diff["tensors"]:
        if row.get("layer") is not None and row["relative_l2"] is not None:
            by_layer.setdefault(row["layer"], []).append(row["relative_l2"])
    layers = sorted(by_layer)
    fig, ax = plt.subplots(figsize=(6, 3.4))
    ax.bar(layers, [float(np.mean(by_layer[i])) for i in layers], color="tab:purple")
    ax.set_xlabel("layer")
    ax.set_ylabel("mean relative L2 change")
    ax.set_title("Where training changed the model (final vs base)")
    fig.tight_layout()
    save_figure(fig, out_pdf, out_png)


def build_weight_diff(base: str, final: str, output: str, out_pdf: str, out_png: str) -> None:
    diff = weight_diff(base, final)
    write_record(output, "weight_diff", {**diff, "provenance": provenance()})
    weight_change_figure(diff, out_pdf, out_png)
