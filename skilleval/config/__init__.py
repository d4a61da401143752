"""The experiment config: schemas (package data), loading with line numbers, cross-field
checks. The workflow plans runs from it (skilleval.workflow.plan)."""

from skilleval.config.checks import validate_config
from skilleval.config.loading import load_config_file, merged_config

__all__ = ["load_config_file", "merged_config", "validate_config"]
