"""The experiment config: schemas (package data), cross-field checks, loading, the run planner.

Rules call :class:`~skilleval.config.rule_inputs.RuleInputs`; Python code plans with
:class:`~skilleval.config.plan.WorkflowPlan`.
"""

from skilleval.config.checks import validate_config
from skilleval.config.loading import load_config_file, merged_config
from skilleval.config.plan import ContrastPlan, RankingArm, RunPlan, WorkflowPlan

__all__ = [
    "ContrastPlan",
    "RankingArm",
    "RunPlan",
    "WorkflowPlan",
    "load_config_file",
    "merged_config",
    "validate_config",
]
