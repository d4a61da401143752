"""Versioned JSON records: every artifact carries ``format_version``; readers check it.

A reader meeting a version it does not know stops with the file, the version found and
the fix, instead of misreading a field whose meaning changed. Every JSON record file is
written and read through a ``Record`` model (fields checked on read); JSON-lines streams
(task records, journal lines) and the world's inputs are versioned dicts, checked line by
line where they are read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, ValidationError

from skilleval.errors import RecordVersionError
from skilleval.storage import atomic
from skilleval.storage.hashing import canonical_hash

# One version per kind of record; bump it when a field changes meaning or shape.
FORMAT_VERSIONS: dict[str, int] = {
    "run_summary": 3,
    "task_record": 1,
    "transcript": 1,
    "contrast": 3,
    "verdict": 2,
    "verdict_family": 1,
    "gate_design": 2,
    "gate_beta": 3,
    "truth_check": 3,
    "experiment_b": 3,
    "frozen_bank": 3,
    "checkpoint_audit": 2,
    "weight_diff": 2,
    "ground_truth": 2,
    "world_catalogue": 1,
    "task_split": 1,
    "ablation_split": 1,
    "ablation_summary": 1,
    "ablation_audit": 1,
    "gpu_lease": 1,
    "journal_meta": 1,
    "archive_note": 1,
}


@dataclass(frozen=True)
class Check:
    """One named validity check with its outcome and a sentence saying why."""

    name: str
    passed: bool
    detail: str

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "passed": bool(self.passed), "detail": self.detail}


def failed(checks: Iterable[Check]) -> list[Check]:
    return [check for check in checks if not check.passed]


def versioned(kind: str, data: Mapping[str, Any]) -> dict[str, Any]:
    return {**data, "format_version": FORMAT_VERSIONS[kind]}


def check_version(kind: str, data: Mapping[str, Any], source: str) -> None:
    found = data.get("format_version")
    if found != FORMAT_VERSIONS[kind]:
        raise RecordVersionError(
            f"{source}: {kind.replace('_', ' ')} record has format_version {found!r}, but this "
            f"skilleval reads version {FORMAT_VERSIONS[kind]}; rebuild it "
            f"(snakemake --cores 1 --forcerun {source}) or read it with the skilleval "
            "release that wrote it"
        )


def _read_record(path: str | Path, kind: str) -> dict[str, Any]:
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict):
        raise RecordVersionError(f"{path}: expected a JSON object holding a {kind} record")
    check_version(kind, data, str(path))
    return data


def read_records(path: str | Path, kind: str) -> list[dict[str, Any]]:
    """The records of a JSON-lines file, each version-checked."""
    with open(path) as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    for number, record in enumerate(records, start=1):
        check_version(kind, record, f"{path} line {number}")
    return records


class Record(BaseModel):
    """A typed record: fields checked on read, written back in the shape it was given.

    Subclasses set ``kind``. Optional fields that were never set are left out of the
    file, so a record's JSON keeps exactly the keys its writer gave it.
    """

    # Validators are built on first use, not at import: a job reads few of the kinds.
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    kind: ClassVar[str]
    format_version: int

    @classmethod
    def create(cls, **fields: Any) -> Self:
        return cls.from_json(versioned(cls.kind, fields), f"new {cls.kind} record")

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str) -> Self:
        check_version(cls.kind, data, source)
        try:
            return cls.model_validate(dict(data))
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise RecordVersionError(
                f"{source}: not a valid {cls.kind.replace('_', ' ')} record: {where}: "
                f"{first['msg']}; rebuild it (snakemake --cores 1 --forcerun {source})"
            ) from None

    @classmethod
    def read(cls, path: str | Path) -> Self:
        return cls.from_json(_read_record(path, cls.kind), str(path))

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=True)

    def write(self, path: str | Path) -> None:
        atomic.write_json(path, self.as_json())

    def content_sha256(self) -> str:
        """Hash of the record without its provenance: equal for equal content, whenever
        and wherever it was built."""
        return canonical_hash({k: v for k, v in self.as_json().items() if k != "provenance"})
