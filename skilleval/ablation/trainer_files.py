"""Reading what a trainer wrote: one parser per value, shared by the audit and
``skilleval trainer check``, so that the check says "cannot" exactly where the audit would
fail.

A file that does not parse (a truncated JSON, a YAML syntax error), a YAML file cut off
mid-line (which may still parse, its last keys lost) and a value that does
not parse (a batch list with ``...`` in it, a start that is no ISO 8601 time) are a
:class:`TrainerOutputError` naming the file and position, or the value and where it was
read, with a fix; never a bare ``JSONDecodeError`` or ``ValueError``.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path
from typing import Any

import yaml

from skilleval.errors import SkillevalError

YAML_SUFFIXES = (".yaml", ".yml")


class TrainerOutputError(SkillevalError):
    """A trainer's file or value the audit cannot read: the run is recorded invalid with
    this reason (or, for its scores, the job stops with it)."""


def read_structured(path: Path) -> Any:
    """A trainer's JSON file, or YAML where its name ends in .yaml or .yml."""
    text = path.read_text()
    if path.suffix in YAML_SUFFIXES:
        # YAML writers end every line, the last too: a file cut off at a line's end still
        # parses, with its last keys missing, so the missing newline is what tells.
        if text and not text.endswith("\n"):
            last = text.splitlines()[-1]
            raise TrainerOutputError(
                f"{path}: truncated: it ends in the middle of line {len(text.splitlines())} "
                f"({last[-40:]!r}) with no final newline, so the keys after it are lost; "
                "re-run the trainer (was it killed while writing?)"
            )
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"
            problem = getattr(error, "problem", None) or str(error)
            raise TrainerOutputError(
                f"{path}: not valid YAML at {where} ({problem}); the trainer wrote it "
                "incompletely or not as YAML: re-run the trainer, or point "
                "trainer.contract at the file it writes"
            ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        truncated = " (the file ends there: truncated?)" if error.pos >= len(text.rstrip()) else ""
        raise TrainerOutputError(
            f"{path}: not valid JSON at line {error.lineno}, column {error.colno}: "
            f"{error.msg}{truncated}; re-run the trainer, or name a YAML file "
            "(.yaml) in trainer.contract if it writes YAML"
        ) from None


def read_mapping(path: Path) -> dict[str, Any]:
    """A trainer's config or results file, which must hold a mapping."""
    data = read_structured(path)
    if not isinstance(data, dict):
        raise TrainerOutputError(
            f"{path}: holds {type(data).__name__}, not a mapping of keys; the audit reads "
            "keys from it (trainer.contract)"
        )
    return data


def parse_count(value: str, what: str, where: str) -> int:
    """A whole number the trainer printed (its train size)."""
    try:
        return int(value.strip())
    except ValueError:
        raise TrainerOutputError(
            f"{where}: {what} {value!r} is not a whole number; fix the trainer's log line "
            "or trainer.contract.log_lines"
        ) from None


def parse_sizes(value: str, where: str) -> list[int]:
    """The batch sizes the trainer printed, the numbers of a bracketed list."""
    parts = [part for part in value.replace(",", " ").split() if part]
    try:
        return [int(part) for part in parts]
    except ValueError:
        raise TrainerOutputError(
            f"{where}: batch sizes {value!r} are not a list of whole numbers (the trainer "
            "shortened it?); the audit needs every size: print the whole list, or change "
            "trainer.contract.log_lines.batch_sizes"
        ) from None


def parse_start(value: str, where: str) -> dt.datetime:
    """When the trainer started: an ISO 8601 time, UTC where it names no zone."""
    try:
        stamp = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise TrainerOutputError(
            f"{where}: start {value!r} is not an ISO 8601 time (such as "
            "2026-05-04T09:30:00+00:00); fix the trainer's log line or "
            "trainer.contract.log_lines.start"
        ) from None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.UTC)


def config_int(config: dict[str, Any], key: str, path: Path) -> int:
    """A whole-number setting of the trainer's effective config."""
    if key not in config:
        raise TrainerOutputError(f"{path} has no {key} (map it in trainer.contract.config_keys)")
    try:
        return int(config[key])
    except (TypeError, ValueError):
        raise TrainerOutputError(f"{path}: {key} = {config[key]!r} is not a whole number") from None


def move_aside(out_root: Path, beside: list[Path], stamp: str) -> Path | None:
    """Move what an earlier launch left in ``out_root`` (and its launch files ``beside``)
    into ``.earlier/<run>/<stamp>`` next to it, so that the audit reads only the new
    launch's files and nothing written before is lost. The folder, or None if empty."""
    inside = list(out_root.iterdir()) if out_root.is_dir() else []
    earlier = [*inside, *(path for path in beside if path.exists())]
    if not earlier:
        return None
    folder = out_root.parent / ".earlier" / out_root.name / stamp
    folder.mkdir(parents=True, exist_ok=False)
    for path in earlier:
        shutil.move(str(path), str(folder / path.name))
    return folder
