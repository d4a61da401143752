"""skilleval: every number of the paper is a file built from declared inputs."""

from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


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


# Every rule's code fingerprint is computed by now; keep them for the next start.
CODE_CACHE.save()


rule all:
    default_target: True
    input:
        rules.paper.input,
