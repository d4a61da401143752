# Checkpoint audits (shards present and readable, fingerprint) and the weight change
# from the first to the last registered checkpoint.

WEIGHT_CHANGE = weight_change_pair(CONFIG)


rule audit_checkpoint:
    input:
        weights=INPUTS.checkpoint_weights,
        shards=INPUTS.checkpoint_shards,
    output:
        audit=report(
            paths.CHECKPOINT_AUDIT,
            caption="../report/checkpoint_audit.rst",
            category="Audits",
        ),
    log:
        f"{paths.LOGS}/audit/checkpoint-{{ckid}}.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        code=code("audit_checkpoint.py"),
        sources=INPUTS.checkpoint_sources,
    script:
        "../scripts/audit_checkpoint.py"


rule audit_weight_diff:
    input:
        base=SOURCES.input_file(WEIGHT_CHANGE["base"]["path"]),
        final=SOURCES.input_file(WEIGHT_CHANGE["final"]["path"]),
    output:
        diff=paths.WEIGHT_DIFF,
        pdf=paths.figure("weight_change", "pdf"),
        png=report(
            paths.figure("weight_change", "png"),
            caption="../report/weight_change.rst",
            category="Audits",
        ),
    log:
        f"{paths.LOGS}/audit/weight_diff.log",
    conda:
        "../envs/skilleval.yaml"
    resources:
        gpu=0,
    params:
        code=code("audit_weight_diff.py"),
        # Sums of squares stream from disk; a CPU keeps up, and the job leases no card.
        device="cpu",
        names={role: c["name"] for role, c in WEIGHT_CHANGE.items()},
        sources=SOURCES.digests({role: c["path"] for role, c in WEIGHT_CHANGE.items()}),
    script:
        "../scripts/audit_weight_diff.py"
