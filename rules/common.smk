import sys
from pathlib import Path

from skilleval import paths
from skilleval.ablation.matrix import load_matrix
from skilleval.ablation.ratios import RATIOS
from skilleval.config.checks import validate_config
from skilleval.config.input_files import check_input_files
from skilleval.workflow.frozen import check_frozen, load_registry
from skilleval.config.typos import not_one_of, refuse
from skilleval.workflow.scheduling import GATE_CHAIN_PRIORITY, RunScheduling
from skilleval.workflow.snakemake_internals import default_resource_args, host_resource
from skilleval.workflow.plan import (
    RANKING_PAIRWISE,
    WorkflowPlan,
    front_rows,
    weight_change_pair,
)
from skilleval.workflow.rule_inputs import (
    SIM_TRAINER_JOB,
    AblationInputs,
    RuleInputs,
    SourceFiles,
)
from skilleval.errors import ConfigError, GpuLeaseError
from skilleval.report.where import where_results
from skilleval.provenance.code import SourceCache
from skilleval.provenance.digests import FileDigests
from skilleval.provenance.evidence import model_run_code, rule_code, trainer_run_code
from skilleval.serving.gpu import check_requests, gpu_requests, profile_cards
from skilleval.storage.hashing import canonical
from skilleval.world.design import world_design
from skilleval.world.digests import world_digests

CONFIG_SOURCE = CONFIG_SOURCES
CACHE_DIR = Path(".snakemake/skilleval")
try:
    validate_config(config, CONFIG_SOURCE)
    WORLD_DIR = config["world"]["dir"]
    SOURCES = SourceFiles(
        [paths.RESULTS, WORLD_DIR], FileDigests(CACHE_DIR / "file-digests.json")
    )
    WORLD_DESIGN = world_design(config)
    check_input_files(
        config, CONFIG_SOURCE, SOURCES.is_built, WORLD_DESIGN.generated_files()
    )
    MATRIX = load_matrix(config["ablation"]["matrix"])
except ConfigError as error:
    sys.exit(f"skilleval: invalid config\n{error}")
_host_cards = profile_cards(default_resource_args(workflow))
try:
    check_requests(
        gpu_requests(config),
        host_resource(workflow, "gpu"),
        CONFIG_SOURCE,
        _host_cards,
    )
except GpuLeaseError as error:
    sys.exit(f"skilleval: {error}")
try:
    check_frozen(
        config["protocols"],
        CONFIG_SOURCE.files[0].data.get("protocols", {}),
        load_registry(paths.FROZEN_PROTOCOLS),
        CONFIG_SOURCE,
        paths.FROZEN_PROTOCOLS,
    )
except ConfigError as error:
    sys.exit(f"skilleval: invalid config\n{error}")

IS_DEFAULT_WORLD = config["backends"]["environment"] == "shopsim"
CODE_CACHE = SourceCache(CACHE_DIR / "code-cache.json")
WORLD_DIGESTS = world_digests(config["world"], WORLD_DESIGN, CACHE_DIR, CODE_CACHE)
PLAN = WorkflowPlan(config)
INPUTS = RuleInputs(PLAN, WORLD_DIGESTS, SOURCES)
RUN_SCHEDULING = RunScheduling(PLAN)
SCRIPTS = Path(workflow.basedir) / "scripts"
GATE = PLAN.gate
RANKING_BANK_PATH = config["banks"][config["ranking"]["bank"]]["path"]
RANKING_BANK = SOURCES.input_file(RANKING_BANK_PATH)
BARE_VAL_RUN = INPUTS.run_outputs(config["ranking"]["bare_val_run"])
BARE_VAL_INPUTS = PLAN.run_inputs(PLAN.runs[config["ranking"]["bare_val_run"]])


def code(script=None, modules=(), templates=()):
    """What a rule's outputs are computed by: its script (or, for shell rules, its entry
    modules), the package modules they import and its templates. In params, so
    Snakemake's params trigger compares them."""
    script_path = SCRIPTS / script if script else None
    return rule_code(script_path, modules, templates, cache=CODE_CACHE)


# Model and trainer runs: only the code that can change their result (provenance.evidence).
MODEL_RUN_CODE = model_run_code(SCRIPTS, CODE_CACHE)
TRAINER_RUN_CODE = trainer_run_code(CODE_CACHE)
try:
    ABLATION_INPUTS = AblationInputs(
        MATRIX, config["ablation"]["matrix"], TRAINER_RUN_CODE, SOURCES.file_digests
    )
except ConfigError as error:
    sys.exit(f"skilleval: invalid config\n{error}")
# The groups the paper draws: a group of one value has no line to draw.
ABLATION_GROUPS = [g for g, spec in MATRIX["groups"].items() if len(spec["values"]) > 1]
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
    bench="|".join(MATRIX["benchmarks"]),
    ckid="|".join(c["checkpoint_id"] for c in config["checkpoints"].values()),
