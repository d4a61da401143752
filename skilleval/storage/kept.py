"""Kept copies of a complete job's outputs, for the early cutoff of expensive jobs.

Snakemake deletes a job's declared outputs before the job runs. A model or trainer job
whose evidence identity equals that of a complete result it kept copies that result back,
byte for byte, instead of computing it again; the copies live under the identity's name
outside the declared outputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from skilleval.storage import atomic


class KeptOutputs:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def restore(self, outputs: Mapping[str, str]) -> bool:
        """Copy every kept output back to its path; False, and nothing written, unless
        every one of ``outputs`` (name -> path) is kept."""
        kept = {name: self.folder / name for name in outputs}
        if not all(path.is_file() for path in kept.values()):
            return False
        for name, path in outputs.items():
            atomic.write_bytes(path, kept[name].read_bytes())
        return True

    def keep(self, outputs: Mapping[str, str]) -> None:
        for name, path in outputs.items():
            atomic.write_bytes(self.folder / name, Path(path).read_bytes())
