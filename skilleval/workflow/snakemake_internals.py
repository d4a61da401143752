"""The Snakemake internals the workflow reads, each in one place.

Snakemake documents no interface for these, so each accessor names the source it reads
and refuses, naming the Snakemake version, when a release moved it.
tests/test_snakemake_internals.py calls every one on the installed Snakemake.
"""

from __future__ import annotations

import ast
import re
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


# How Snakemake 9 words a job's reason (snakemake/dag.py Reason.__str__, as the logger's
# job_info event carries it: a string, no structure): each kind of cause by the words its
# part begins with. No documented interface gives these causes as values.
REASON_KINDS = {
    "Params have changed": "params",
    "Missing output files": "missing",
    "Input files updated by another job": "updated_by_job",
    "Updated input files": "updated_input",
    "Forced execution": "forced",
}
PARAMS_CHANGE = re.compile(r"before: (?P<before>.*?) now: (?P<now>.*?)\s*$")
NOTHING = "<nothing exclusive>"


def reason_parts(reason: str) -> list[tuple[str, str, str]]:
    """A job's reason as (kind, what follows the colon, the cause's own words) per cause;
    kind ``other`` for words no kind above begins."""
    parts = []
    for part in re.split(r";\s*(?=[A-Z])", reason):
        part = part.strip()
        if not part:
            continue
        kind = next((k for words, k in REASON_KINDS.items() if part.startswith(words)), "other")
        parts.append((kind, part.split(":", 1)[-1].strip(), part))
    return parts


def params_change(detail: str) -> tuple[list[Any], list[Any]] | None:
    """The params before and now of a params cause (Reason's "before: ... now: ..."), each
    a comma-joined list of Python reprs as Snakemake prints them; None without both."""
    change = PARAMS_CHANGE.search(detail)
    if change is None:
        return None
    return literals(change["before"]), literals(change["now"])


def literals(text: str) -> list[Any]:
    """The values of a comma-joined list of Python reprs (how Snakemake prints params)."""
    text = text.strip()
    if not text or text == NOTHING:
        return []
    values, pending = [], ""
    for piece in text.split(","):
        pending = f"{pending},{piece}" if pending else piece
        try:
            values.append(ast.literal_eval(pending.strip()))
        except (ValueError, SyntaxError):
            continue
        pending = ""
    return values
