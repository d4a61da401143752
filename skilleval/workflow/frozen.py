"""Frozen protocols: numbers of another protocol are never shown as this one's (memo 000 §0).

A protocol registered as frozen (config/frozen-protocols.yaml: name -> digest of the values
that reach evidence) refuses, when the workflow is parsed, a config whose values give
another digest: an overlay that changes its sampling, its runtime or its server's model is
refused, naming each changed key. Addresses, timeouts and start-up limits are no such
values (each protocol's execution section) and may differ from host to host.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from skilleval.errors import ConfigError
from skilleval.runs.inputs import protocol_digest, protocol_evidence


def load_registry(path: str | Path) -> dict[str, str]:
    """The frozen protocols' digests; none where the registry file is absent."""
    if not Path(path).is_file():
        return {}
    data = yaml.safe_load(Path(path).read_text()) or {}
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise ConfigError(
            str(path), "(registry)", data, "not a mapping of protocol name to digest", "restore it"
        )
    return {str(k): v for k, v in data.items()}


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
    registry: Mapping[str, str],
    source: object,
    registry_file: str,
) -> None:
    """Refuse a frozen protocol whose values reaching evidence are not the registered ones.
    ``shipped``: the protocols of the workflow's own config file, to name what changed."""
    for name, digest in registry.items():
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
