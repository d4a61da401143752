import sys

from skilleval.ablation.plan import load_matrix
from skilleval.config.checks import validate_config
from skilleval.config.loading import load_config_file
from skilleval.config.plan import RANKING_PAIRWISE, WorkflowPlan
from skilleval.config.rule_inputs import RuleInputs
from skilleval.errors import ConfigError, GpuLeaseError
from skilleval.serving.gpu import check_requests, gpu_requests
from skilleval import paths

CONFIG_SOURCE = ", ".join(str(f) for f in workflow.configfiles) or "config"
try:
    for config_file in workflow.configfiles:
        load_config_file(config_file)
    validate_config(config, CONFIG_SOURCE)
    MATRIX = load_matrix(config["ablation"]["matrix"])
except ConfigError as error:
    sys.exit(f"skilleval: invalid config\n{error}")
_host_gpus = workflow.global_resources.get("gpu")
try:
    check_requests(
        gpu_requests(config), getattr(_host_gpus, "value", _host_gpus), CONFIG_SOURCE
    )
except GpuLeaseError as error:
    sys.exit(f"skilleval: {error}")

PLAN = WorkflowPlan(config)
INPUTS = RuleInputs(PLAN, MATRIX)
GATE = PLAN.gate
WORLD_DIR = PLAN.world_dir
RANKING_BANK = config["banks"][config["ranking"]["bank"]]["path"]
BARE_VAL_RUN = INPUTS.run_outputs(config["ranking"]["bare_val_run"])
BARE_VAL_INPUTS = PLAN.run_inputs(PLAN.runs[config["ranking"]["bare_val_run"]])
IS_DEFAULT_WORLD = config["backends"]["environment"] == "shopsim"


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
