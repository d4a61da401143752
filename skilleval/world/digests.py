"""What the world generator would write now, as digests, without writing it.

World rules carry these digests in ``params``: an edit of the generator makes exactly
the world files whose content it changes stale (one draft chunk's text: that bank
only), where a code fingerprint would make every world file stale. The digests are
cached under the generator's code fingerprint and the world config, so a dry run only
regenerates in memory when one of them changed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skilleval.provenance.code import MEMORY, SourceCache
from skilleval.provenance.evidence import rule_code
from skilleval.storage import atomic
from skilleval.storage.hashing import canonical_hash
from skilleval.world.design import WorldDesign


def _digest(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "little") + part)
    return digest.hexdigest()[:16]


def generate_digests(world: Mapping[str, Any], design: WorldDesign) -> dict[str, str]:
    # Imported here: a dry run whose digests are cached never loads the generator.
    from skilleval.world.generate import (
        bank_text,
        checkpoint_config,
        checkpoint_tensors,
        world_task_files,
    )

    seed = world["seed"]
    catalogue, splits = world_task_files(
        seed, world["categories"], world["products_per_category"], world["split_sizes"]
    )
    digests = {"tasks": _digest(catalogue.encode(), splits.encode())}
    for name, checkpoint in design.checkpoints.items():
        tensors = checkpoint_tensors(seed, checkpoint)
        parts = [
            f"{k}{v.dtype}{v.shape}".encode() + v.tobytes() for k, v in sorted(tensors.items())
        ]
        digests[f"checkpoint/{name}"] = _digest(*parts, checkpoint_config().encode())
    for name, bank in design.banks.items():
        digests[f"bank/{name}"] = _digest(bank_text(seed, name, bank).encode())
    return digests


def world_digests(
    world: Mapping[str, Any],
    design: WorldDesign,
    cache_dir: Path,
    code_cache: SourceCache = MEMORY,
) -> dict[str, str]:
    """Digests of every generated world file, from the cache when nothing changed."""
    code = rule_code(modules=["skilleval.world.generate"], cache=code_cache)
    designs = {
        "checkpoints": {n: d.as_params() for n, d in design.checkpoints.items()},
        "banks": {n: d.as_params() for n, d in design.banks.items()},
    }
    key = canonical_hash({"code": code, **world, "design": designs})
    cache = cache_dir / "world-digests.json"
    if cache.exists():
        cached = json.loads(cache.read_text())
        if cached.get("key") == key:
            return dict(cached["digests"])
    digests = generate_digests(world, design)
    atomic.write_json(cache, {"key": key, "digests": digests})
    return digests
