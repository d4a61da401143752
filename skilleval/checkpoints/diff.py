"""Where training changed a model: the relative L2 change of every tensor two checkpoints share.

Streamed: the two tensors being compared are read side by side in bounded chunks, so
memory stays flat however large the model. Sums of squares are accumulated in fp64,
on a GPU when torch sees one (torch imported lazily: the main job never needs it).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from skilleval.checkpoints.audit import CheckpointScan, scan_checkpoint
from skilleval.checkpoints.layout import TensorEntry
from skilleval.checkpoints.tensors import chunks
from skilleval.errors import CheckpointError
from skilleval.records.checkpoints import WeightDiff
from skilleval.records.provenance import provenance
from skilleval.storage.figures import PAPER_FONTS, save_figure

DEVICES = ("auto", "cpu", "cuda")


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pick_device(requested: str = "auto") -> str:
    """cuda when asked for or when torch sees a GPU, else cpu."""
    if requested not in DEVICES:
        raise CheckpointError(f"device {requested!r} is not one of {', '.join(DEVICES)}")
    if requested == "cpu":
        return "cpu"
    if cuda_available():
        return "cuda"
    if requested == "cuda":
        raise CheckpointError("device cuda asked for, but torch sees no CUDA GPU here")
    return "cpu"


Pair = tuple[Path, TensorEntry]


def square_sums(base: Pair, final: Pair, device: str) -> tuple[float, float]:
    """(sum of (final - base)^2, sum of base^2) in fp64, one chunk of each tensor at a time."""
    if device != "cpu":
        return _torch_square_sums(base, final, device)
    change = reference = 0.0
    for a, b in zip(chunks(*base), chunks(*final), strict=True):
        a64 = a.astype(np.float64)
        delta = b.astype(np.float64) - a64
        change += float(np.dot(delta, delta))
        reference += float(np.dot(a64, a64))
    return change, reference


def _torch_square_sums(base: Pair, final: Pair, device: str) -> tuple[float, float]:
    import torch

    change = reference = 0.0
    for a, b in zip(chunks(*base), chunks(*final), strict=True):
        base_chunk = torch.from_numpy(a).to(device, torch.float64)
        delta = torch.from_numpy(b).to(device, torch.float64) - base_chunk
        change += float(torch.dot(delta, delta))
        reference += float(torch.dot(base_chunk, base_chunk))
    return change, reference


def _checked_scan(weights: str) -> CheckpointScan:
    scan = scan_checkpoint(weights)
    if scan.problems:
        raise CheckpointError(f"{weights}: " + "; ".join(scan.problems))
    return scan


def tensor_row(name: str, base: Pair, final: Pair, device: str) -> dict[str, Any]:
    layer = re.search(r"layers\.(\d+)\.", name)
    row: dict[str, Any] = {
        "tensor": name,
        "layer": int(layer.group(1)) if layer else None,
        "dtypes": [base[1].dtype, final[1].dtype],
        "elements": base[1].elements,
        "relative_l2": None,
    }
    if base[1].shape != final[1].shape:
        return {**row, "note": f"shape {list(base[1].shape)} -> {list(final[1].shape)}"}
    change, reference = square_sums(base, final, device)
    row["l2_change"] = math.sqrt(change)
    if reference > 0:
        row["relative_l2"] = math.sqrt(change / reference)
    elif change == 0:
        row["relative_l2"] = 0.0
    else:
        row["note"] = "base tensor is all zeros: no relative change"
    return row


def weight_diff(base: str, final: str, device: str = "auto") -> dict[str, Any]:
    """Relative L2 change of every tensor both checkpoints share, one tensor pair at a time."""
    scans = _checked_scan(base), _checked_scan(final)
    folders = [scan.weights.parent for scan in scans if scan.weights is not None]
    held = [
        {name: (folder / shard, entry) for name, (shard, entry) in scan.tensors.items()}
        for scan, folder in zip(scans, folders, strict=True)
    ]
    used = pick_device(device)
    rows = [
        tensor_row(name, held[0][name], held[1][name], used)
        for name in sorted(set(held[0]) & set(held[1]))
    ]
    return {
        "base": base,
        "final": final,
        "device": used,
        "accumulator": "float64",
        "tensors": rows,
        "only_in_base": sorted(set(held[0]) - set(held[1])),
        "only_in_final": sorted(set(held[1]) - set(held[0])),
    }


def render_diff(diff: dict[str, Any], top: int) -> str:
    """The tensors training changed most, largest relative change first."""
    rows = [r for r in diff["tensors"] if r["relative_l2"] is not None]
    rows.sort(key=lambda r: -r["relative_l2"])
    lines = [
        f"{diff['final']} vs {diff['base']}: {len(diff['tensors'])} shared tensors "
        f"(on {diff['device']}, fp64 sums); the {min(top, len(rows))} most changed:"
    ]
    lines += [f"  {r['relative_l2']:.6f}  {r['tensor']}" for r in rows[:top]]
    lines += [f"  {r['tensor']}: {r['note']}" for r in diff["tensors"] if r.get("note")]
    for side in ("only_in_base", "only_in_final"):
        if diff[side]:
            lines.append(f"  {side.replace('_', ' ')}: {', '.join(diff[side])}")
    return "\n".join(lines)


def weight_change_figure(
    diff: dict[str, Any], out_pdf: str, out_png: str, names: tuple[str, str]
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_layer: dict[int, list[float]] = {}
    for row in diff["tensors"]:
        if row.get("layer") is not None and row["relative_l2"] is not None:
            by_layer.setdefault(row["layer"], []).append(row["relative_l2"])
    layers = sorted(by_layer)
    with plt.rc_context(PAPER_FONTS):
        fig, ax = plt.subplots(figsize=(4.0, 2.5), layout="constrained")
        ax.bar(layers, [float(np.mean(by_layer[i])) for i in layers], color="tab:purple")
        ax.set_xlabel("layer")
        ax.set_ylabel("mean relative L2 change")
        ax.set_title(f"Where training changed the model\n({names[1]} vs {names[0]})")
        save_figure(fig, out_pdf, out_png)


def build_weight_diff(
    base: str,
    final: str,
    output: str,
    out_pdf: str,
    out_png: str,
    names: tuple[str, str],
    device: str,
) -> None:
    diff = weight_diff(base, final, device)
    WeightDiff.create(**diff, checkpoints=list(names), provenance=provenance()).write(output)
    weight_change_figure(diff, out_pdf, out_png, names)
