"""Peak memory of the weight-change diff on a synthetic bf16 checkpoint of at least 2 GB.

Writes two Qwen3-4B-shaped bf16 checkpoints in the Hugging Face layout (index + 1 GB
shards; the embedding alone is 778 MB), then runs ``skilleval checkpoint diff`` on them
in a child process and reads the child's peak resident memory. A baseline child that
only imports the diff code gives the interpreter's own share.

Prints the checkpoint size, the largest tensor, the peak RSS above the baseline and the
throughput, per device (``--device cpu cuda`` on a GPU host, with the largest relative
difference between the two devices' per-tensor changes). Asserts nothing.
SKILLEVAL_BENCH_SIZE=tiny writes a checkpoint of a few hundred kB instead.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HIDDEN, FFN, VOCAB, LAYERS = 2560, 9728, 151936, 7
SHARD_BYTES = 1 << 30
if os.environ.get("SKILLEVAL_BENCH_SIZE") == "tiny":
    HIDDEN, FFN, VOCAB, LAYERS, SHARD_BYTES = 64, 128, 1000, 2, 1 << 16
BLOCK = 16 * 1024 * 1024


def shapes() -> dict[str, tuple[int, ...]]:
    tensors: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (VOCAB, HIDDEN)}
    for i in range(LAYERS):
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            tensors[f"model.layers.{i}.self_attn.{name}.weight"] = (HIDDEN, HIDDEN)
        for name, shape in (("gate_proj", (FFN, HIDDEN)), ("up_proj", (FFN, HIDDEN))):
            tensors[f"model.layers.{i}.mlp.{name}.weight"] = shape
        tensors[f"model.layers.{i}.mlp.down_proj.weight"] = (HIDDEN, FFN)
        tensors[f"model.layers.{i}.input_layernorm.weight"] = (HIDDEN,)
    tensors["model.norm.weight"] = (HIDDEN,)
    return tensors


def to_bf16(values: np.ndarray) -> bytes:
    """Round-to-nearest-even fp32 -> bf16, as torch does."""
    bits = values.astype(np.float32).view(np.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype("<u2").tobytes()


def plan_shards(tensors: dict[str, tuple[int, ...]]) -> list[list[str]]:
    shards: list[list[str]] = [[]]
    size = 0
    for name, shape in tensors.items():
        nbytes = int(np.prod(shape)) * 2
        if shards[-1] and size + nbytes > SHARD_BYTES:
            shards.append([])
            size = 0
        shards[-1].append(name)
        size += nbytes
    return shards


def write_pair(root: Path) -> tuple[Path, Path]:
    """base and final (base moved by 1e-3 relative noise), written block by block."""
    tensors = shapes()
    shards = plan_shards(tensors)
    rng = np.random.default_rng(20261130)
    folders = [root / "base", root / "final"]
    weight_map: dict[str, str] = {}
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
    for i, names in enumerate(shards):
        shard = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        header: dict[str, object] = {}
        offset = 0
        for name in names:
            nbytes = int(np.prod(tensors[name])) * 2
            header[name] = {
                "dtype": "BF16",
                "shape": list(tensors[name]),
                "data_offsets": [offset, offset + nbytes],
            }
            offset += nbytes
            weight_map[name] = shard
        encoded = json.dumps(header).encode()
        encoded += b" " * (-len(encoded) % 8)
        with contextlib.ExitStack() as stack:
            handles = [stack.enter_context(open(folder / shard, "wb")) for folder in folders]
            for handle in handles:
                handle.write(len(encoded).to_bytes(8, "little") + encoded)
            for name in names:
                left = int(np.prod(tensors[name]))
                while left:
                    n = min(left, BLOCK)
                    base = rng.standard_normal(n, dtype=np.float32) * 0.02
                    final = base * (1 + 1e-3 * rng.standard_normal(n, dtype=np.float32))
                    handles[0].write(to_bf16(base))
                    handles[1].write(to_bf16(final))
                    left -= n
    for folder in folders:
        index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
        (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return folders[0], folders[1]


MEASURE = """
import json, resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True, check=True)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"peak_kb": peak, "stdout": done.stdout}))
"""


def child_peak_mb(command: list[str]) -> tuple[float, float, str]:
    """(peak RSS in MB, wall seconds, stdout) of a command, measured by its own parent."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, *command], capture_output=True, text=True, check=True
    )
    wall = time.perf_counter() - start
    measured = json.loads(done.stdout)
    return measured["peak_kb"] / 1024, wall, measured["stdout"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", help="where to write the checkpoints (default: a temp dir)")
    parser.add_argument("--device", nargs="+", default=["cpu"], choices=["cpu", "cuda"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        start = time.perf_counter()
        base, final = write_pair(Path(tmp))
        size = sum(p.stat().st_size for p in base.glob("*.safetensors"))
        largest = max(int(np.prod(s)) for s in shapes().values())
        print(
            f"checkpoint: {size / 1e9:.2f} GB bf16 in {len(list(base.glob('*.safetensors')))} "
            f"shards, {len(shapes())} tensors; largest tensor {largest * 2 / 1e6:.0f} MB bf16 "
            f"({largest * 4 / 1e6:.0f} MB as fp32); written in {time.perf_counter() - start:.0f} s"
        )
        baseline, _, _ = child_peak_mb(
            [sys.executable, "-c", "import skilleval.checkpoints.diff, skilleval.cli"]
        )
        print(f"baseline (interpreter + imports): {baseline:.0f} MB")
        results = {}
        for device in args.device:
            cli = [sys.executable, "-m", "skilleval.cli", "checkpoint", "diff"]
            peak, wall, out = child_peak_mb(
                [*cli, str(base), str(final), "--json", "--device", device]
            )
            results[device] = {r["tensor"]: r["relative_l2"] for r in json.loads(out)["tensors"]}
            print(
                f"{device}: peak RSS {peak:.0f} MB, {peak - baseline:.0f} MB above baseline "
                f"({(peak - baseline) / (largest * 2 / 1e6):.2f} x the largest bf16 tensor); "
                f"{wall:.1f} s, {2 * size / 1e9 / wall:.2f} GB/s read"
            )
        if len(results) == 2:
            cpu, cuda = results["cpu"], results["cuda"]
            worst = max(abs(cpu[k] - cuda[k]) / cpu[k] for k in cpu)
            print(f"cpu vs cuda: largest relative difference per tensor {worst:.2e}")


if __name__ == "__main__":
    main()
