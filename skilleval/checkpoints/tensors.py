"""Reading the sim policy's tensors from a checkpoint (kept apart: it needs numpy)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

from skilleval.checkpoints.files import shard_paths
from skilleval.errors import CheckpointError


def load_policy_tensors(weights: str | Path) -> dict[str, np.ndarray]:
    tensors: dict[str, np.ndarray] = {}
    for shard in shard_paths(weights):
        if not os.path.exists(shard):
            raise CheckpointError(f"{shard}: shard named in the index is missing")
        tensors.update({k: v for k, v in load_file(str(shard)).items() if k.startswith("policy.")})
    if "policy.decision_logits" not in tensors:
        raise CheckpointError(
            f"{weights}: no policy.decision_logits tensor; the sim policy needs a shopsim "
            "checkpoint (use the openai backend for real model weights)"
        )
    return tensors
