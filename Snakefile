"""skilleval: every number of the paper is a file built from declared inputs."""

import gc
import sys

from snakemake.utils import min_version

from skilleval import paths
from skilleval.config.loading import config_sources
from skilleval.errors import ConfigError
from skilleval.logs import (
    package_for_build,
    record_build_command,
    record_rule_targets,
)
from skilleval.serving.gpu import job_environment
from skilleval.workflow.snakemake_internals import (
    config_files,
    rule_targets,
    targets_rule,
)

min_version("9.17.0")

# What Snakemake and the package imported lives as long as this process: frozen, it is
# left out of the cyclic collector's full passes while the rules and the DAG are built.
gc.freeze()

# A checkout runs its own code, in the Snakefile and in every job: a venv installed from
# another checkout would have this graph's staleness and jobs be that checkout's.
if problem := package_for_build(workflow.basedir):
    sys.exit(f"skilleval: {problem}")

# Every job inherits this process's environment, on every executor: no job sees a CUDA
# device unless it leases one, and cards are numbered as nvidia-smi numbers them.
job_environment()
# A stopped job's message repeats the user's own command (config files, profile, targets).
record_build_command(sys.argv)

# A job ignores SIGINT until the package is imported (skilleval/__init__.py then ends it
# in one line on an interrupt): Ctrl-C signals the whole process group, and one landing
# in the few hundred milliseconds of Snakemake's own script preamble (it unpickles the
# job and imports snakemake) would print a traceback. An ignored signal stays ignored
# across exec (bash's trap ''), a handled one does not, so every later child is as usual.
shell.prefix("set -euo pipefail; trap '' INT; ")

# Read every config file through the project's loader before Snakemake's: a syntax error
# or a repeated key is then reported with its file, line and column.
try:
    CONFIG_SOURCES = config_sources(config_files(workflow))
except ConfigError as error:
    sys.exit(f"skilleval: invalid config\n{error}")


configfile: paths.CONFIG_FILE


report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/world.smk"
include: "rules/eval.smk"
include: "rules/gate.smk"
include: "rules/ranking.smk"
include: "rules/compare.smk"
include: "rules/audit.smk"
include: "rules/ablation.smk"
include: "rules/paper.smk"
include: "rules/typos.smk"


# A target that names no rule is answered with the nearest rule names (the logger plugin).
record_rule_targets(rule_targets(workflow))


# On a cluster (profiles/slurm) only the rules that serve or train a model, or read whole
# checkpoints, are submitted: the rest take seconds on files already at hand, where a cluster
# job costs a queue wait and a Snakemake start of its own.
localrules:
    world_tasks,
    world_checkpoint,
    world_bank,
    world_ground_truth,
    gate_design,
    gate_beta,
    gate_truth_check,
    gate_experiment_b,
    freeze_bank,
    contrast,
    verdict,
    ablation_splits,
    ablation_table,
    harness_table,
    ablation_figures,
    paper_notice,
    paper_verdict_family,
    paper_ablation_section,
    paper_main_table,
    paper_forest_plot,
    report_front,
    paper_ranking_table,
    paper_beta_plot,
    paper,
    paper_pdf,
    all,


# Every rule's code fingerprint is computed by now; keep them for the next start.
CODE_CACHE.save()


rule all:
    default_target: True
    input:
        rules.paper.input,
