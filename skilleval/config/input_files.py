"""The input files the config names: each exists, or is one the graph builds; a bank the
graph does not build is read, and must hold the chunks the config declares for it."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from skilleval.errors import BankError, ConfigError
from skilleval.skills.bank import load_bank


def declared_files(config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(config key, path) of every file the config names as an input."""
    files = [(f"checkpoints.{n}.path", c["path"]) for n, c in config["checkpoints"].items()]
    files += [(f"banks.{n}.path", b["path"]) for n, b in config["banks"].items()]
    for name, protocol in config["protocols"].items():
        files.append((f"protocols.{name}.tasks.split_file", protocol["tasks"]["split_file"]))
        files += [(f"protocols.{name}.prompt.{k}", v) for k, v in protocol["prompt"].items()]
    return [*files, ("ablation.matrix", config["ablation"]["matrix"])]


def check_input_files(
    config: Mapping[str, Any],
    source: object,
    is_built: Callable[[str], bool],
    buildable: Collection[str],
) -> None:
    """Every named input exists, or is a file the graph builds; checked before any job,
    on a built tree as on an empty one, so stale numbers are never kept by mistake."""
    for key, path in declared_files(config):
        if not is_built(path):
            if not Path(path).exists():
                raise ConfigError(
                    source,
                    key,
                    path,
                    "file does not exist",
                    "point the key at an existing file (paths are relative to the workflow "
                    "directory) or restore the file",
                )
        elif path not in buildable:
            raise ConfigError(
                source,
                key,
                path,
                "lies in a folder the graph builds, but no rule builds this file",
                f"use one of the files the default world generates: {', '.join(sorted(buildable))}",
            )
    for name, bank in config["banks"].items():
        if not is_built(bank["path"]):
            check_external_bank(source, name, bank)


def check_external_bank(source: object, name: str, bank: Mapping[str, Any]) -> None:
    """A bank the graph does not build is read now: its declared chunk count is the one
    every ranking and design uses, so a bank that holds another number is refused before
    any job, as the graph's own banks are when they are built."""
    try:
        skills = load_bank(bank["path"])
    except (BankError, OSError, ValueError) as error:
        raise ConfigError(
            source, f"banks.{name}.path", bank["path"], f"cannot be read as a bank: {error}",
            "give a Markdown bank of '## chunk <id>' sections or a JSON list of chunks",
        ) from None  # fmt: skip
    if len(skills) != bank["chunks"]:
        raise ConfigError(
            source,
            f"banks.{name}.chunks",
            bank["chunks"],
            f"the bank file {bank['path']} holds {len(skills)} chunks",
            f"set banks.{name}.chunks: {len(skills)}, or give the bank file with "
            f"{bank['chunks']} chunks",
        )
