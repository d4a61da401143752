"""The config as Snakemake sees it, for the commands that read it outside a build."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from skilleval.config.checks import validate_config
from skilleval.config.loading import config_sources, merged_config
from skilleval.errors import SkillevalError


def snakemake_config(root: Path, configfiles: Sequence[str], profile: str | None) -> dict[str, Any]:
    """config/config.yaml extended by each ``configfiles`` entry, then a profile's
    ``config:``, which Snakemake applies as --config: it overrides every config file."""
    from snakemake.utils import update_config

    files = [root / f for f in ["config/config.yaml", *configfiles]]
    config = merged_config(files)
    if profile:
        profile_file = next(
            (
                p / "config.yaml"
                for p in (root / profile, Path(profile))
                if (p / "config.yaml").exists()
            ),
            None,
        )
        if profile_file is None:
            raise SkillevalError(f"--profile {profile}: no config.yaml in {root / profile}")
        update_config(config, yaml.safe_load(profile_file.read_text()).get("config") or {})
    validate_config(config, config_sources(files))
    return config
