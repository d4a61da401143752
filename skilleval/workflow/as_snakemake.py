"""The config as Snakemake sees it, for the commands that read it outside a build: merged
and checked as the workflow checks it when parsed (its schema, its rules, the frozen
protocols)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import yaml

from skilleval import paths
from skilleval.config.checks import validate_config
from skilleval.config.loading import config_sources, merged_config
from skilleval.config.model import Config
from skilleval.config.typos import unknown_name
from skilleval.errors import SkillevalError
from skilleval.workflow.frozen import check_frozen_config
from skilleval.workflow.plan import WorkflowPlan


def snakemake_config(root: Path, configfiles: Sequence[str], profile: str | None) -> Config:
    """config/config.yaml extended by each ``configfiles`` entry, then a profile's
    ``config:``, which Snakemake applies as --config: it overrides every config file."""
    from snakemake.utils import update_config

    files = [root / f for f in [paths.CONFIG_FILE, *configfiles]]
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
    sources = config_sources(files)
    typed = validate_config(config, sources)
    check_frozen_config(config, sources, root)
    return typed


def check_declared_run(directory: Path, root: Path) -> None:
    """A run directory that is not there and whose name the config does not declare: name
    the declared runs (a typo), rather than a build command that cannot work."""
    if (directory / paths.SUMMARY_FILE).exists() or not (root / paths.CONFIG_FILE).exists():
        return
    plan = WorkflowPlan(snakemake_config(root, [], None))
    declared = [*plan.runs, *plan.masked]
    if directory.name not in declared:
        raise SkillevalError(
            f"{directory}: "
            + unknown_name("run", directory.name, declared)
            + "; a run's directory is results/runs/<run> (a masked run's is under results/gate)"
        )
