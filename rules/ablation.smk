# Ablation and harness matrices of memo 003: runs, audits, splits, tables, figures.
# Runs go through the skilleval CLI (shell:) rather than script:/run:, which would start
# Snakemake itself once per job: for 216 runs that start-up would dominate the build.


rule ablation_split:
    output:
        split="results/ablation/splits/{bench}/{ratio}_seed42.json",
    log:
        "results/logs/ablation/split-{bench}-{ratio}.log",
    wildcard_constraints:
        ratio="1shot|1-1-8|2-1-7|4-1-5",
    conda:
        "../envs/skilleval.yaml"
    params:
        pool=get_split_pool,
    shell:
        "skilleval ablation split {wildcards.bench} {wildcards.ratio} --pool {params.pool}"
        " --output {output.split} > {log} 2>&1"


rule ablation_run:
    output:
        summary="results/ablation/{bench}/{run_id}/summary.json",
        audit="results/audit/ablation/{bench}/{run_id}.json",
    log:
        "results/logs/ablation/{bench}/{run_id}.log",
    conda:
        "../envs/skilleval.yaml"
    resources:
        api_runs=1,
        memory_heavy=get_memory_heavy,
    params:
        matrix=config["ablation"]["matrix"],
        fingerprint=get_ablation_fingerprint,
    shell:
        "skilleval ablation run {wildcards.run_id} --matrix {params.matrix}"
        " --summary {output.summary} --audit {output.audit} > {log} 2>&1"


rule ablation_table:
    input:
        get_ablation_table_inputs,
    output:
        tex="paper/tables/ablation_{bench}.tex",
        csv="paper/tables/ablation_{bench}.csv",
        md="paper/tables/ablation_{bench}.md",
        html=report(
            "paper/tables/ablation_{bench}.html",
            caption="../report/ablation_table.rst",
            category="Ablations",
            subcategory="{bench}",
        ),
    log:
        "results/logs/paper/ablation_{bench}.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        matrix=config["ablation"]["matrix"],
    script:
        "../scripts/ablation_table.py"


rule harness_table:
    input:
        [f for run_id in HARNESS_IDS for f in ABLATION_FILES[run_id]],
    output:
        tex="paper/tables/harness.tex",
        csv="paper/tables/harness.csv",
        md="paper/tables/harness.md",
        html=report(
            "paper/tables/harness.html",
            caption="../report/harness_table.rst",
            category="Ablations",
        ),
    log:
        "results/logs/paper/harness.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        matrix=config["ablation"]["matrix"],
    script:
        "../scripts/harness_table.py"


rule ablation_figure:
    input:
        get_ablation_figure_inputs,
    output:
        pdf="paper/figures/ablation_{group}.pdf",
        png=report(
            "paper/figures/ablation_{group}.png",
            caption="../report/ablation_figure.rst",
            category="Ablations",
        ),
    log:
        "results/logs/paper/ablation_figure_{group}.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        matrix=config["ablation"]["matrix"],
    script:
        "../scripts/ablation_figure.py"
