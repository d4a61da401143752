import sys

from skilleval.config import validate_config
from skilleval.errors import ConfigError
from skilleval.workflow import WorkflowConfig

CONFIG_SOURCE = ", ".join(str(f) for f in workflow.configfiles) or "config"
try:
    validate_config(config, CONFIG_SOURCE)
except ConfigError as error:
    sys.exit(f"skilleval: invalid config\n{error}")

WF = WorkflowConfig(config)
RUNS = WF.plans
WORLD_DIR = config["world"]["dir"]
GATE = WF.gate
MAIN_RUNS = WF.main_runs()
MAIN_CONTRASTS = WF.contrasts_for("main")
RANKING_ARMS = WF.ranking_paper_arms()
RANKING_CONTRASTS = WF.contrasts_for("ranking")
IS_DEFAULT_WORLD = config["backends"]["environment"] == "shopsim"


wildcard_constraints:
    run="|".join(RUNS),
    contrast="|".join(WF.contrasts),
    gate=GATE,
    masked="(masked|fresh)-[0-9]+",
    checkpoint="[A-Za-z0-9_-]+",
    bank="[A-Za-z0-9_-]+",


def get_run_inputs(wildcards):
    return WF.run_input_files(wildcards.run)


def get_run_params(wildcards):
    return WF.run_inputs(wildcards.run)


def get_masked_inputs(wildcards):
    return WF.masked_input_files(wildcards.masked)


def get_masked_params(wildcards):
    return WF.masked_inputs(wildcards.masked)


def get_world_checkpoint_files(wildcards):
    return list(WF.world_checkpoint_files().values())


def get_world_bank_files(wildcards):
    return list(WF.world_bank_files().values())


def get_contrast_control(wildcards):
    return WF.contrast_run_files(wildcards.contrast, "control")


def get_contrast_treatment(wildcards):
    return WF.contrast_run_files(wildcards.contrast, "treatment")


def get_contrast_spec(wildcards):
    return WF.contrasts[wildcards.contrast]


def get_design_params(wildcards):
    return WF.design_params(wildcards.design)


def get_masked_run_files(wildcards):
    return expand(
        "results/gate/{gate}/runs/{masked}/summary.json",
        gate=GATE,
        masked=WF.masked_runs("gate"),
    )


def get_fresh_run_files(wildcards):
    return expand(
        "results/gate/{gate}/runs/{masked}/summary.json",
        gate=GATE,
        masked=WF.masked_runs("b"),
    )


def get_freeze_params(wildcards):
    return WF.freeze_params(wildcards.arm)
