"""Task splits: the split file's tasks of one split, by id."""

from __future__ import annotations

import json
from pathlib import Path

from skilleval.errors import SkillevalError


def load_task_ids(split_file: str, split: str) -> list[str]:
    data = json.loads(Path(split_file).read_text())
    if split not in data:
        raise SkillevalError(f"{split_file}: no split {split!r}; it has {sorted(data)}")
    return [t["task_id"] if isinstance(t, dict) else str(t) for t in data[split]]
