"""The Snakemake internals the workflow reads, each in one place.

Snakemake documents no interface for these, so each accessor names the source it reads
and refuses, naming the Snakemake version, when a release moved it.
tests/test_snakemake_internals.py calls every one on the installed Snakemake.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

from skilleval import paths
from skilleval.errors import SkillevalError


def _moved(what: str, used_for: str) -> SkillevalError:
    from snakemake import __version__

    return SkillevalError(
        f"Snakemake {__version__} no longer has {what}, which skilleval reads for "
        f"{used_for}; install a Snakemake release pyproject.toml allows"
    )


def config_files(workflow: Any) -> list[str]:
    """Every config file of the build, the default one first: the files given with
    --configfile (Workflow.overwrite_configfiles, snakemake/workflow.py)."""
    try:
        extra = workflow.overwrite_configfiles
    except AttributeError:
        raise _moved("Workflow.overwrite_configfiles", "the config files") from None
    return [paths.CONFIG_FILE, *map(str, extra)]


def host_resource(workflow: Any, name: str) -> int | None:
    """The build's --resources NAME (Workflow.global_resources), None when not set."""
    try:
        value = workflow.global_resources.get(name)
    except AttributeError:
        raise _moved("Workflow.global_resources", "the host's cards") from None
    value = getattr(value, "value", value)
    return None if value is None else int(value)


def default_resource_args(workflow: Any) -> list[str] | None:
    """The build's --default-resources as given (ResourceSettings.default_resources.args)."""
    try:
        settings = workflow.resource_settings
    except AttributeError:
        raise _moved("Workflow.resource_settings", "the cards a profile leases") from None
    return getattr(settings.default_resources, "args", None)


def targets_rule(workflow: Any, rule: str) -> bool:
    """Whether a job of ``rule`` is one of the build's targets (DAG.targetjobs)."""
    try:
        jobs = workflow.dag.targetjobs
    except AttributeError:
        raise _moved("Workflow.dag.targetjobs", "the closing message") from None
    return any(job.rule.name == rule for job in jobs)


def rule_targets(workflow: Any) -> list[str]:
    """The rules a user can name as a target: those whose outputs hold no wildcard
    (Workflow.rules, snakemake/workflow.py; Rule.has_wildcards)."""
    try:
        return sorted(rule.name for rule in workflow.rules if not rule.has_wildcards())
    except AttributeError:
        raise _moved("Workflow.rules", "the targets a typo is compared with") from None


Model = TypeVar("Model", bound=BaseModel)


def not_a_rerun_trigger(value: Model) -> Model:
    """``value`` as a params entry that reaches the job and is no rerun trigger: Snakemake's
    params trigger compares only the params it can write down (builtins and pandas objects,
    Persistence._serialize_param, snakemake/persistence/__init__.py) and leaves out any
    other, such as a pydantic model."""
    if not isinstance(value, BaseModel):
        raise TypeError(f"{value!r} would be compared by the params trigger; pass a model")
    return value
