import sys
from pathlib import Path

from skilleval import paths
from skilleval.ablation.ratios import RATIOS
from skilleval.config.typos import not_one_of, refuse
from skilleval.workflow.report_status import report_requested, write_report_status
from skilleval.workflow.scheduling import GATE_CHAIN_PRIORITY, RunScheduling
from skilleval.workflow.snakemake_internals import (
    config_files,
    default_resource_args,
    host_resource,
)
from skilleval.workflow.plan import (
    RANKING_PAIRWISE,
    WorkflowPlan,
    front_rows,
    weight_change_pair,
)
from skilleval.workflow.parse_checks import check_inputs
from skilleval.workflow.rule_inputs import SIM_TRAINER_JOB, RuleInputs
from skilleval.errors import ConfigError, GpuLeaseError
from skilleval.report.where import where_results
from skilleval.provenance.evidence import model_run_code, rule_code
from skilleval.serving.gpu import profile_cards
from skilleval.storage.hashing import canonical
from skilleval.world.digests import world_digests

try:
    CHECKED = check_inputs(
        config,
        CONFIG_SOURCES,
        host_resource(workflow, "gpu"),
        profile_cards(default_resource_args(workflow)),
    )
except ConfigError as error:
    sys.exit(f"skilleval: invalid config\n{error}")
except GpuLeaseError as error:
    sys.exit(f"skilleval: {error}")
# The config as typed values, checked once above; rules read it, not `config`.
CONFIG = CHECKED.config
WORLD_DIR = CONFIG.world.dir
SOURCES = CHECKED.sources
WORLD_DESIGN = CHECKED.world_design
MATRIX = CHECKED.matrix
CODE_CACHE = CHECKED.code_cache
ABLATION_INPUTS = CHECKED.ablation_inputs

IS_DEFAULT_WORLD = CONFIG.backends.environment == "shopsim"
WORLD_DIGESTS = world_digests(
    CONFIG.world.settings(), WORLD_DESIGN, Path(paths.CACHE_DIR), CODE_CACHE
)
PLAN = WorkflowPlan(CONFIG)
INPUTS = RuleInputs(PLAN, WORLD_DIGESTS, SOURCES)
RUN_SCHEDULING = RunScheduling(PLAN)
SCRIPTS = Path(workflow.basedir) / "scripts"
GATE = PLAN.gate
RANKING_BANK_PATH = CONFIG.banks[CONFIG.ranking.bank].path
RANKING_BANK = SOURCES.input_file(RANKING_BANK_PATH)
BARE_VAL_RUN = INPUTS.run_outputs(CONFIG.ranking.bare_val_run)
BARE_VAL_INPUTS = PLAN.run_inputs(PLAN.runs[CONFIG.ranking.bare_val_run])


def code(script=None, modules=(), templates=()):
    """What a rule's outputs are computed by: its script (or, for shell rules, its entry
    modules), the package modules they import and its templates. In params, so
    Snakemake's params trigger compares them."""
    script_path = SCRIPTS / script if script else None
    return rule_code(script_path, modules, templates, cache=CODE_CACHE)


# Model and trainer runs: only the code that can change their result (provenance.evidence).
MODEL_RUN_CODE = model_run_code(SCRIPTS, CODE_CACHE)
TRAINER_RUN_CODE = ABLATION_INPUTS.code
# The groups the paper draws: a group of one value has no line to draw.
ABLATION_GROUPS = [g for g, spec in MATRIX.groups.items() if len(spec.values) > 1]
SPLIT_RATIOS = list(RATIOS)


wildcard_constraints:
    run="|".join(PLAN.runs),
    contrast="|".join(PLAN.contrasts),
    gate=GATE,
    masked="|".join(PLAN.masked),
    design="|".join(PLAN.designs),
    arm="|".join(PLAN.arms),
    checkpoint="[A-Za-z0-9_-]+",
    bank="[A-Za-z0-9_-]+",
    bench="|".join(MATRIX.benchmarks),
    ckid="|".join(c.checkpoint_id for c in CONFIG.checkpoints.values()),
