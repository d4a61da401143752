# Ablation and harness matrices of memo 003: runs, audits, splits, tables, figures.
# A command trainer's run goes through the skilleval CLI (shell:) rather than run:, which
# would start Snakemake itself once per job.


# Every ratio split in one job: each is milliseconds of work after a second of start-up.
rule ablation_splits:
    output:
        splits=expand(
            paths.ABLATION_SPLIT,
            bench=ABLATION_INPUTS.split_pools,
            ratio=SPLIT_RATIOS,
        ),
    log:
        f"{paths.LOGS}/ablation/splits.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        code=code("ablation_splits.py"),
        pools=ABLATION_INPUTS.split_pools,
        ratios=SPLIT_RATIOS,
    script:
        "../scripts/ablation_splits.py"


if ABLATION_INPUTS.in_one_job:
    # The sim trainer: the runs of one benchmark in one job (AblationInputs.in_one_job),
    # one job per benchmark rather than one for all, so that matching a file to the job
    # that makes it searches tens of outputs, not hundreds (Snakemake's rules.is_producer
    # tries a rule's outputs one by one). Its params hold each run's identity, so an edit
    # that changes one run re-runs its benchmark's job, which restores every other run
    # from its kept result.
    for bench in ABLATION_INPUTS.benchmarks:

        rule:
            name:
                f"{SIM_TRAINER_JOB}_{bench}"
            input:
                matrix=ancient(CONFIG.ablation.matrix),
            output:
                summaries=ABLATION_INPUTS.run_summaries(bench),
                audits=ABLATION_INPUTS.run_audits(bench),
            log:
                f"{paths.LOGS}/ablation/runs-{bench}.log",
            # Seconds of work on any executor: never a cluster job.
            localrule: True
            conda:
                "../envs/skilleval.yaml"
            params:
                code=code("ablation_runs.py"),
                identities=ABLATION_INPUTS.run_identities(bench),
                kept=paths.ABLATION_KEPT,
            script:
                "../scripts/ablation_runs.py"

else:

    rule ablation_run:
        input:
            # The matrix's content reaches the run through its plan fingerprint (params).
            matrix=ancient(CONFIG.ablation.matrix),
        output:
            summary=paths.ABLATION_SUMMARY,
            audit=paths.ABLATION_AUDIT,
        log:
            f"{paths.LOGS}/ablation/{{bench}}/{{run_id}}.log",
        conda:
            "../envs/skilleval.yaml"
        resources:
            api_runs=1,
            memory_heavy=ABLATION_INPUTS.memory_heavy,
        params:
            code=TRAINER_RUN_CODE,
            evidence=ABLATION_INPUTS.ablation_evidence,
            identity=ABLATION_INPUTS.ablation_identity,
            kept=paths.ABLATION_KEPT,
        shell:
            "skilleval ablation run {wildcards.run_id} --matrix {input.matrix}"
            " --summary {output.summary} --audit {output.audit}"
            " --identity {params.identity} --kept {params.kept} > {log} 2>&1"


rule ablation_table:
    input:
        runs=ABLATION_INPUTS.ablation_table_files,
        matrix=ancient(CONFIG.ablation.matrix),
    output:
        tex=paths.table("ablation_{bench}", "tex"),
        csv=paths.table("ablation_{bench}", "csv"),
        md=paths.table("ablation_{bench}", "md"),
        html=report(
            paths.table("ablation_{bench}", "html"),
            caption="../report/ablation_table.rst",
            category="Ablations",
            subcategory="{bench}",
        ),
    log:
        f"{paths.LOGS}/paper/ablation_{{bench}}.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        code=code("ablation_table.py", templates=["ablation_table.tex.j2"]),
        layout=ABLATION_INPUTS.ablation_table_layout,
    script:
        "../scripts/ablation_table.py"


rule harness_table:
    input:
        runs=ABLATION_INPUTS.harness_files,
        matrix=ancient(CONFIG.ablation.matrix),
    output:
        tex=paths.table("harness", "tex"),
        csv=paths.table("harness", "csv"),
        md=paths.table("harness", "md"),
        html=report(
            paths.table("harness", "html"),
            caption="../report/harness_table.rst",
            category="Ablations",
        ),
    log:
        f"{paths.LOGS}/paper/harness.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        code=code("harness_table.py", templates=["ablation_table.tex.j2"]),
        layout=ABLATION_INPUTS.harness_layout,
    script:
        "../scripts/harness_table.py"


# Every ablation figure and their shared legend in one job: matplotlib's import is most of
# a figure's cost, so one job per group paid it ten times over for a millisecond's drawing.
rule ablation_figures:
    input:
        runs=ABLATION_INPUTS.ablation_figure_files(ABLATION_GROUPS),
        matrix=ancient(CONFIG.ablation.matrix),
    output:
        pdfs=expand(paths.figure("ablation_{group}", "pdf"), group=ABLATION_GROUPS),
        pngs=[
            report(
                paths.figure(f"ablation_{group}", "png"),
                caption="../report/ablation_figure.rst",
                category="Ablations",
            )
            for group in ABLATION_GROUPS
        ],
        legend=paths.figure("benchmark_legend", "pdf"),
    log:
        f"{paths.LOGS}/paper/ablation_figures.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        code=code("ablation_figures.py"),
        groups=ABLATION_GROUPS,
        drawn=ABLATION_INPUTS.ablation_groups(ABLATION_GROUPS),
    script:
        "../scripts/ablation_figures.py"
