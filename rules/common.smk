import sys

from skilleval.config import validate_config
from skilleval.errors import ConfigError
from skilleval.gpu import GpuLeaseError, check_requests
from skilleval.workflow import WorkflowConfig

CONFIG_SOURCE = ", ".join(str(f) for f in workflow.configfiles) or "config"
try:
    validate_config(config, CONFIG_SOURCE)
except ConfigError as error:
    sys.exit(f"skilleval: invalid config\n{error}")

WF = WorkflowConfig(config)
_host_gpus = workflow.global_resources.get("gpu")
try:
    check_requests(
        WF.gpu_requests(), getattr(_host_gpus, "value", _host_gpus), CONFIG_SOURCE
    )
except GpuLeaseError as error:
    sys.exit(f"skilleval: {error}")
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
    bench="[a-z]+",
    ckid="|".join(c["checkpoint_id"] for c in config["checkpoints"].values()),


def get_run_gpus(wildcards):
    return WF.gpus_for(WF.plans[wildcards.run].protocol)


def get_masked_gpus(wildcards):
    return WF.gpus_for(WF.masked_plan(wildcards.masked).protocol)


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


from skilleval.ablation.plan import audit_path, load_matrix, plan, plan_fingerprint

try:
    ABLATION = load_matrix(config["ablation"]["matrix"])
except ConfigError as error:
    sys.exit(f"skilleval: invalid ablation matrix\n{error}")
ABLATION_RUNS = {run.run_id: run for run in plan(ABLATION)}
ABLATION_FILES = {
    run_id: (run.summary_path, audit_path(run)) for run_id, run in ABLATION_RUNS.items()
}
HARNESS_IDS = [r for r, run in ABLATION_RUNS.items() if run.harness]
ABLATION_BENCHMARKS = list(ABLATION["benchmarks"])
ABLATION_GROUPS = [
    g for g, spec in ABLATION["groups"].items() if len(spec["values"]) > 1
]
RATIO_SPLITS = [
    f"results/ablation/splits/{bench}/{ratio}_seed42.json"
    for bench, spec in ABLATION["benchmarks"].items()
    if spec["pool"]
    for ratio in ("1shot", "1-1-8", "2-1-7", "4-1-5")
]


def get_split_pool(wildcards):
    return ABLATION["benchmarks"][wildcards.bench]["pool"]


def get_ablation_fingerprint(wildcards):
    return plan_fingerprint(ABLATION_RUNS[wildcards.run_id], ABLATION)


def get_memory_heavy(wildcards):
    return int(ABLATION["benchmarks"][wildcards.bench]["memory_heavy"])


def get_ablation_table_inputs(wildcards):
    files = []
    for run_id, run in ABLATION_RUNS.items():
        if run.benchmark == wildcards.bench and not run.harness:
            files.extend(ABLATION_FILES[run_id])
    return files


def get_ablation_figure_inputs(wildcards):
    benches = ABLATION["groups"][wildcards.group]["benchmarks"]
    files = []
    for run_id, run in ABLATION_RUNS.items():
        if run.benchmark in benches and not run.harness:
            files.extend(ABLATION_FILES[run_id])
    return files


def get_checkpoint_weights(wildcards):
    return WF.checkpoint_by_id(wildcards.ckid)["path"]


def get_checkpoint_shard_stats(wildcards):
    return WF.shard_stats(wildcards.ckid)


def get_contrast_audits(wildcards):
    audits = WF.contrast_audit_files(wildcards.contrast)
    return [audits["control"], audits["treatment"]]
