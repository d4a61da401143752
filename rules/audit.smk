# Checkpoint audits (shards present and readable, fingerprint) and the weight change.


rule audit_checkpoint:
    input:
        weights=get_checkpoint_weights,
    output:
        audit=report(
            "results/audit/checkpoints/{ckid}.json",
            caption="../report/checkpoint_audit.rst",
            category="Audits",
        ),
    log:
        "results/logs/audit/checkpoint-{ckid}.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        shards=get_checkpoint_shard_stats,
    script:
        "../scripts/audit_checkpoint.py"


rule audit_weight_diff:
    input:
        base=config["checkpoints"]["base"]["path"],
        final=config["checkpoints"]["final"]["path"],
    output:
        diff="results/audit/weights/base-vs-final.json",
        pdf="paper/figures/weight_change.pdf",
        png=report(
            "paper/figures/weight_change.png",
            caption="../report/weight_change.rst",
            category="Audits",
        ),
    log:
        "results/logs/audit/weight_diff.log",
    conda:
        "../envs/skilleval.yaml"
    resources:
        gpu=0,
    script:
        "../scripts/audit_weight_diff.py"
