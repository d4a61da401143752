"""Frozen protocols: numbers of another protocol are never shown as this one's (memo 000 §0).

A protocol registered as frozen (config/frozen-protocols.yaml: name -> digest of the values
that reach evidence) refuses, when the workflow is parsed, a config whose values give
another digest: an overlay that changes its sampling, its runtime or its server's model is
refused, naming each changed key. Addresses, timeouts and start-up limits are no such
values (each protocol's execution section) and may differ from host to host.

A registry entry may also hold the SHA-256 of the protocol's prompt files (``prompt:
{system, skill_template}``): the files are compared by content, so an edit in place of a
frozen protocol's system prompt or skill template is refused too, naming the file.
Registering a lab's own prompt for a frozen protocol is an edit of the registry, the lab's
file (docs/real-server.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from skilleval import paths
from skilleval.config.loading import ConfigSources
from skilleval.errors import ConfigError
from skilleval.runs.inputs import protocol_digest, protocol_evidence
from skilleval.storage.hashing import file_sha256


@dataclass(frozen=True)
class Frozen:
    """A registered protocol: the digest of its values that reach evidence, and the
    SHA-256 of its prompt files by role (system, skill_template), where registered."""

    digest: str
    prompt: Mapping[str, str] = field(default_factory=dict)


def _entry(path: str | Path, name: str, value: Any) -> Frozen:
    if isinstance(value, str):
        return Frozen(value)
    prompt = value.get("prompt", {}) if isinstance(value, dict) else None
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("digest"), str)
        or not isinstance(prompt, dict)
        or not all(isinstance(v, str) for v in prompt.values())
    ):
        raise ConfigError(
            str(path),
            name,
            value,
            "not a digest, nor {digest: ..., prompt: {system: sha256, skill_template: sha256}}",
            "restore it",
        )
    return Frozen(value["digest"], {str(k): v for k, v in prompt.items()})


def load_registry(path: str | Path) -> dict[str, Frozen]:
    """The frozen protocols; none where the registry file is absent."""
    if not Path(path).is_file():
        return {}
    data = yaml.safe_load(Path(path).read_text()) or {}
    if not isinstance(data, dict):
        raise ConfigError(
            str(path), "(registry)", data, "not a mapping of protocol name to digest", "restore it"
        )
    return {str(name): _entry(path, str(name), value) for name, value in data.items()}


def check_frozen_prompts(
    protocols: Mapping[str, Any],
    registry: Mapping[str, Frozen],
    source: object,
    registry_file: str,
    root: Path = Path("."),
) -> None:
    """Refuse a frozen protocol whose prompt files' contents are not the registered ones
    (``root``: where relative prompt paths start)."""
    for name, frozen in registry.items():
        prompt = (protocols.get(name) or {}).get("prompt") or {}
        for role, registered in frozen.prompt.items():
            file = root / str(prompt.get(role, ""))
            if not file.is_file():
                continue  # a missing file is named by the input-file check
            found = file_sha256(file)
            if found == registered:
                continue
            raise ConfigError(
                source,
                f"protocols.{name}.prompt.{role}",
                str(prompt[role]),
                f"protocol {name} is frozen with another {role} prompt: {file} has sha256 "
                f"{found[:12]}, the registry {registered[:12]} ({registry_file})",
                f"restore {file}, or register the new prompt under a new protocol name (or, "
                f"for a lab's own prompt, record its sha256 as {name}.prompt.{role} in "
                f"{registry_file}: docs/real-server.md)",
            )


def changed_keys(before: Any, after: Any, prefix: str = "") -> list[str]:
    """The dotted keys whose values differ between two nested mappings."""
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        keys = sorted(set(before) | set(after))
        return [
            k
            for key in keys
            for k in changed_keys(before.get(key), after.get(key), f"{prefix}{key}.")
        ]
    return [] if before == after else [prefix.rstrip(".")]


def check_frozen(
    protocols: Mapping[str, Any],
    shipped: Mapping[str, Any],
    registry: Mapping[str, Frozen],
    source: object,
    registry_file: str,
    root: Path = Path("."),
) -> None:
    """Refuse a frozen protocol whose values reaching evidence are not the registered ones.
    ``shipped``: the protocols of the workflow's own config file, to name what changed."""
    check_frozen_prompts(protocols, registry, source, registry_file, root)
    for name, frozen in registry.items():
        digest = frozen.digest
        if name not in protocols or protocol_digest(name, protocols[name]) == digest:
            continue
        changed = changed_keys(
            protocol_evidence(shipped.get(name) or {}), protocol_evidence(protocols[name])
        )
        fix = (
            f"keep {name}'s values, or register the changed ones under a new protocol name "
            f"(protocols.<new-name>, with the runs' protocol: <new-name>); {name} is frozen "
            f"in {registry_file}"
        )
        if not changed:
            raise ConfigError(
                source,
                f"protocols.{name}",
                "(edited in place)",
                f"the frozen protocol's values no longer give its registered digest {digest[:12]}",
                fix,
            )
        first = f"protocols.{name}.{changed[0]}"
        value: Any = protocols[name]
        for part in changed[0].split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        raise ConfigError(
            source,
            first,
            value,
            f"protocol {name} is frozen; this config changes {', '.join(changed)}",
            fix,
        )


def check_frozen_config(
    config: Mapping[str, Any], sources: ConfigSources, root: Path = Path(".")
) -> None:
    """The frozen-protocol check of a merged config, as the workflow and every command
    that reads the config make it: the registry of the workflow at ``root``, the shipped
    protocols of its first config file."""
    registry_file = root / paths.FROZEN_PROTOCOLS
    shipped = sources.files[0].data.get("protocols", {}) if sources.files else {}
    registry = load_registry(registry_file)
    check_frozen(config["protocols"], shipped, registry, sources, str(registry_file), root)
