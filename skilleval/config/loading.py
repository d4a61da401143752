"""Reading config files: one YAML mapping, or several merged as Snakemake merges them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from skilleval.errors import ConfigError, SkillevalError
from skilleval.storage.yamlfile import SafeLoader


def load_config_file(path: str | Path) -> dict[str, Any]:
    with open(path) as handle:
        data = yaml.load(handle, Loader=SafeLoader)
    if not isinstance(data, dict):
        raise ConfigError(str(path), "(top level)", data, "not a mapping", "write a YAML mapping")
    return data


def merged_config(configfiles: list[str]) -> dict[str, Any]:
    def merge(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
        for key, value in update.items():
            if isinstance(value, Mapping) and isinstance(base.get(key), dict):
                merge(base[key], value)
            else:
                base[key] = value
        return base

    config: dict[str, Any] = {}
    for path in configfiles:
        if not Path(path).exists():
            raise SkillevalError(f"{path}: config file not found")
        merge(config, yaml.load(Path(path).read_text(), Loader=SafeLoader) or {})
    return config
