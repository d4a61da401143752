import sys

from skilleval.config import run_specs, validate_config
from skilleval.errors import ConfigError
from skilleval.workflow import WorkflowConfig

CONFIG_SOURCE = ", ".join(str(f) for f in workflow.configfiles) or "config"
try:
    validate_config(config, CONFIG_SOURCE)
except ConfigError as error:
    sys.exit(f"skilleval: invalid config\n{error}")

WF = WorkflowConfig(config)
RUNS = run_specs(config)
WORLD_DIR = config["world"]["dir"]


wildcard_constraints:
    run="|".join(RUNS),
    checkpoint="[A-Za-z0-9_-]+",
    bank="[A-Za-z0-9_-]+",
    contrast="|".join(config["contrasts"]),


def get_run_inputs(wildcards):
    return WF.run_input_files(wildcards.run)


def get_run_params(wildcards):
    return WF.run_inputs(wildcards.run)


def get_world_checkpoint_files(wildcards):
    return list(WF.world_checkpoint_files().values())


def get_world_bank_files(wildcards):
    return list(WF.world_bank_files().values())


def get_contrast_control(wildcards):
    return WF.contrast_run_files(wildcards.contrast, "control")


def get_contrast_treatment(wildcards):
    return WF.contrast_run_files(wildcards.contrast, "treatment")


def get_contrast_spec(wildcards):
    return config["contrasts"][wildcards.contrast]


MAIN_RUNS = [run for run in RUNS if RUNS[run].split == "test"]
MAIN_CONTRASTS = list(config["contrasts"])
