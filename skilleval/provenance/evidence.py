"""Evidence identity: what can change a model or trainer run's result, decided in one place.

A model run's result is its episodes and the summary made of them; a trainer run's is its
trainer's scores and their audit. Its identity is the content of the inputs it reads plus
the code that can change that result; paths, mtimes and run names are never part of it.
The graph puts the code part in params (Snakemake's params trigger), the run journal is
keyed by the whole identity, and a job whose identity equals that of its complete result
restores that result instead of leasing a card, starting a server or launching a trainer.

Every ``skilleval`` module that a run's code imports is classified below, as evidence or
not, with the reason. A module in neither table counts as evidence, so an unknown never
lets an old result pass for current, and tests/test_evidence.py fails, naming it, until it
is classified.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from skilleval.provenance.code import (
    MEMORY,
    PACKAGE_ROOT,
    SourceCache,
    code_fingerprint,
    module_closure,
    module_path,
)

# The workflow's scripts beside the package in a checkout; a wheel install has none, and
# the workflow then passes its own (rules/common.smk).
CHECKOUT_SCRIPTS = PACKAGE_ROOT.parent / "scripts"

# The entry points of the runs that cost model or trainer time, as the rules start them:
# the model run's script and the package modules it calls, the trainer run's command.
MODEL_RUN_SCRIPT = "eval_run.py"
MODEL_RUN_MODULES = ("skilleval.runs.evaluation", "skilleval.runs.inputs")
TRAINER_RUN_MODULES = ("skilleval.ablation.run",)

# Module (or package, covering everything under it) -> why it can change a result.
EVIDENCE: dict[str, str] = {
    "skilleval.env.rollout": "the rollout loop: turns, stops, what each step records",
    "skilleval.runs.resolve": "the system prompt per task and which episodes a run holds",
    "skilleval.runs.tasks": "which tasks a split names",
    "skilleval.runs.inputs": "which protocol values a run computes with",
    "skilleval.protocol.sections": "the protocol's values as a run reads them, defaults included",
    "skilleval.runs.backends": "which policy and environment a run is given",
    "skilleval.runs.runner": "which episodes run and which failures are restarted",
    "skilleval.runs.evaluation": "which episodes a run computes and what it writes",
    "skilleval.runs.summary": "the summary's metrics, computed from the episodes",
    "skilleval.records.runs": "the summary's fields",
    "skilleval.runs.transcripts": "what of a journal line goes to results.jsonl",
    "skilleval.serving.engines": "which engine a run's requests are written for",
    "skilleval.serving.engines.base": "what an engine declares: its sampling dialect, its launch",
    "skilleval.serving.engines.sglang": "how sglang is sent the sampling and launched",
    "skilleval.serving.engines.vllm": "how vLLM is sent the protocol's sampling",
    "skilleval.serving.engines.llama_server": "how llama-server is sent the protocol's sampling",
    "skilleval.serving.engines.llama_cpp_python": "how llama-cpp-python is sent it and launched",
    "skilleval.serving.engines.hosted": "how a hosted API is sent the protocol's sampling",
    "skilleval.policy": "the policy: the sim decision rule, the OpenAI client's requests",
    "skilleval.env": "the environment adapter and its wire format",
    "skilleval.skills": "skill parsing and how skills are rendered into the prompt",
    "skilleval.world": "the simulated world: shop, tasks and rewards of the default world",
    "skilleval.serving.launcher": "the server's launch flags (sampling defaults, model name)",
    "skilleval.checkpoints.tensors": "the weights the sim policy acts on, as read",
    "skilleval.checkpoints.layout": "which files of a checkpoint are served",
    "skilleval.ablation.run": "what one ablation run builds",
    "skilleval.ablation.trainer": "the trainers: the sim model of training, the launch line",
    "skilleval.ablation.plan": "each run's effective trainer config",
    "skilleval.ablation.ratios": "the ratio sizes a run's train size comes from",
    "skilleval.ablation.audit": "the audit written beside each run",
    "skilleval.ablation.contract": "which files and log lines of a trainer the audit reads",
    "skilleval.ablation.trainer_files": "how the audit parses a trainer's files and values",
    "skilleval.records.ablation": "the ablation summary's fields",
    "skilleval.records.policy": "the turns and tool calls a policy and the rollout exchange",
    "skilleval.records.env": "the observations and steps an environment returns",
}

# Module (or package) -> why it cannot change a run's result.
NOT_EVIDENCE: dict[str, str] = {
    "skilleval.errors": "error messages",
    "skilleval.logs": "the log format",
    "skilleval.paths": "where files live; a run's content digests do not depend on it",
    "skilleval.storage": "atomic writes, hashing and record versions: how files are written",
    "skilleval.provenance": "provenance blocks: who built a result, when, from which code",
    "skilleval.records.provenance": "the provenance block's fields: who built a result",
    "skilleval.config": "config loading and validation: values reach a run as its inputs",
    "skilleval.checkpoints.files": "checkpoint fingerprints: part of the identity itself",
    "skilleval.runs.journal": "where finished episodes are kept",
    "skilleval.serving.gpu": "which card a server runs on, never what it computes",
    "skilleval.serving.owners": "who owns a server, for cleaning up after kills",
    "skilleval.serving.processes": "ports, labels and stopping servers",
    "skilleval.serving.containers": "running a server in Docker instead of a process",
    "skilleval.serving.outage": "waiting for a server that is down; the request is the same",
    "skilleval.serving.http": "carries the JSON a run built to its server and the reply back",
    "skilleval.serving.service": "checking the server's identity: it refuses, never changes",
    "skilleval.serving.answerer": "what answered, recorded and compared: it refuses, never changes",
    "skilleval.runs.answered": "stamps each episode with what answered it; refuses a second model",
    "skilleval.serving.probe": "the lease probe job",
    "skilleval.ablation.checks": "matrix validation: a valid matrix builds the same runs",
    "skilleval.ablation.matrix": "reading the matrix file: a valid matrix builds the same runs",
}


@cache
def is_package_marker(module: str) -> bool:
    """A package whose ``__init__`` holds nothing but its docstring and version string:
    importing it runs no code. It is no package entry above, so that a new module under
    it is not taken as classified."""
    path = module_path(module)
    if path is None or path.name != "__init__.py":
        return False
    body = ast.parse(path.read_text()).body
    return all(
        (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
        or (
            isinstance(node, ast.Assign)
            and [getattr(t, "id", None) for t in node.targets] == ["__version__"]
        )
        for node in body
    )


# Package inits that run code yet hold nothing a result can depend on.
PACKAGE_INITS: dict[str, str] = {
    "skilleval": "the version, and quiet interrupts for rule scripts (skilleval.logs)",
}


# Modules no rule's output depends on, whatever the rule: what they hold is only ever shown
# to a person. Every rule's code fingerprint leaves them out (rule_code).
OUTPUT_NEUTRAL: dict[str, str] = {
    "skilleval.errors": "error messages",
    "skilleval.logs": "the log format",
}


def rule_code(
    script: str | Path | None = None,
    modules: Sequence[str] = (),
    templates: Sequence[str] = (),
    cache: SourceCache = MEMORY,
) -> dict[str, str]:
    """File -> digest of what a cheap rule's outputs are computed by: its script, the
    modules it imports but the output-neutral ones, and its templates."""
    neutral = {m.replace(".", "/") for m in OUTPUT_NEUTRAL}
    return {
        file: digest
        for file, digest in code_fingerprint(script, modules, templates, cache).items()
        if _module_stem(file) not in neutral
    }


def classification(module: str) -> tuple[bool, str] | None:
    """(is evidence, why) from the most specific entry naming the module or a package
    above it; None when no entry does."""
    if is_package_marker(module):
        return False, "a package marker: it runs no code"
    if module in PACKAGE_INITS:  # the package alone, never a prefix of its modules
        return False, PACKAGE_INITS[module]
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        name = ".".join(parts[:end])
        if name in EVIDENCE:
            return True, EVIDENCE[name]
        if name in NOT_EVIDENCE:
            return False, NOT_EVIDENCE[name]
    return None


def counts_as_evidence(module: str) -> bool:
    found = classification(module)
    return found is None or found[0]


def unclassified(modules: Sequence[str]) -> list[str]:
    return [m for m in modules if classification(m) is None]


def entry_modules(script: Path | None, modules: Sequence[str], cache: SourceCache) -> list[str]:
    entries = list(modules)
    if script is not None and script.is_file():
        entries += cache.entry(script)[1]
    return entries


def run_closure(
    script: Path | None = None, modules: Sequence[str] = (), cache: SourceCache = MEMORY
) -> list[str]:
    """Every skilleval module a run's code imports."""
    return module_closure(entry_modules(script, modules, cache), cache)


def evidence_code(
    script: Path | None = None, modules: Sequence[str] = (), cache: SourceCache = MEMORY
) -> dict[str, str]:
    """File -> digest of the run's script (where there is one) and of the modules that can
    change its result."""
    present = script if script is not None and script.is_file() else None
    fingerprint = code_fingerprint(present, modules, cache=cache)
    evidence_files = {
        m.replace(".", "/") for m in run_closure(present, modules, cache) if counts_as_evidence(m)
    }
    return {
        file: digest
        for file, digest in fingerprint.items()
        if file.startswith("scripts/") or _module_stem(file) in evidence_files
    }


def model_run_code(scripts: Path = CHECKOUT_SCRIPTS, cache: SourceCache = MEMORY) -> dict[str, str]:
    return evidence_code(scripts / MODEL_RUN_SCRIPT, MODEL_RUN_MODULES, cache)


def trainer_run_code(cache: SourceCache = MEMORY) -> dict[str, str]:
    return evidence_code(modules=TRAINER_RUN_MODULES, cache=cache)


def _module_stem(file: str) -> str:
    """skilleval/a/b.py -> skilleval/a/b; skilleval/a/__init__.py -> skilleval/a."""
    path = Path(file)
    return str(path.parent if path.name == "__init__.py" else path.with_suffix(""))
