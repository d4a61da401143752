# Paper tables and figures (memo §4), rendered from verdicts and run summaries.

MAIN_RUNS = PLAN.main_runs
MAIN_CONTRASTS = PLAN.contrasts_for("main")
FRONT_ROWS = front_rows(PLAN)
RANKING_ARMS = [arm.run for arm in PLAN.paper_arms]
# A report says on its front page whether what it shows is current (report/workflow.rst).
if report_requested(sys.argv):
    write_report_status(CONFIG, Path.cwd(), config_files(workflow)[1:], sys.argv)
# The contrasts each table shows: each table's causal verdicts are one family (Holm), so
# neither table waits for the other's runs.
TABLE_CONTRASTS = {
    "main": MAIN_CONTRASTS,
    "ranking": [*PLAN.ranking_vs_free(), *RANKING_PAIRWISE],
}


# What of the paper is simulated, read from every summary it shows (what answered each
# run, what built each ablation run), never from a config label.
rule paper_notice:
    input:
        runs=expand(
            paths.RUN_SUMMARY,
            run=[*MAIN_RUNS, *RANKING_ARMS, CONFIG.ranking.bare_val_run],
        ),
        ablation=ABLATION_INPUTS.all_summaries(),
    output:
        tex=paths.table("notice", "tex"),
        text=paths.PAPER_NOTICE_TEXT,
    log:
        f"{paths.LOGS}/paper/notice.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        code=code("paper_notice.py"),
    script:
        "../scripts/paper_notice.py"


rule paper_ablation_section:
    output:
        tex=paths.table("section_ablations", "tex"),
    log:
        f"{paths.LOGS}/paper/section_ablations.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        code=code("paper_ablation_section.py", templates=["ablation_section.tex.j2"]),
        benchmarks=list(MATRIX.benchmarks),
        groups=ABLATION_GROUPS,
    script:
        "../scripts/paper_ablation_section.py"


rule paper_verdict_family:
    input:
        verdicts=lambda wildcards: expand(
            paths.VERDICT, contrast=TABLE_CONTRASTS[wildcards.table]
        ),
    output:
        family=paths.VERDICT_FAMILY,
    log:
        f"{paths.LOGS}/paper/verdict_family_{{table}}.log",
    wildcard_constraints:
        table="main|ranking",
    conda:
        "../envs/skilleval.yaml"
    params:
        code=code("paper_verdict_family.py"),
        contrasts=lambda wildcards: TABLE_CONTRASTS[wildcards.table],
        level=round(1 - CONFIG.statistics.confidence, 10),
    script:
        "../scripts/paper_verdict_family.py"


rule paper_main_table:
    input:
        summaries=expand(paths.RUN_SUMMARY, run=MAIN_RUNS),
        verdicts=expand(paths.VERDICT, contrast=MAIN_CONTRASTS),
        family=paths.fill(paths.VERDICT_FAMILY, table="main"),
    output:
        tex=paths.table("main", "tex"),
        csv=paths.table("main", "csv"),
        csv_contrasts=paths.table("main_contrasts", "csv"),
        md=paths.table("main", "md"),
        html=report(
            paths.table("main", "html"),
            caption="../report/main_table.rst",
            category="Tables",
        ),
    log:
        f"{paths.LOGS}/paper/main_table.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        code=code("paper_main_table.py", templates=["main_table.tex.j2"]),
        runs=MAIN_RUNS,
        contrasts=MAIN_CONTRASTS,
        descriptions={c: PLAN.contrasts[c].description for c in MAIN_CONTRASTS},
    script:
        "../scripts/paper_main_table.py"


rule paper_forest_plot:
    input:
        verdicts=expand(paths.VERDICT, contrast=MAIN_CONTRASTS),
    output:
        pdf=paths.figure("contrasts", "pdf"),
        png=report(
            paths.figure("contrasts", "png"),
            caption="../report/forest_plot.rst",
            category="Figures",
        ),
    log:
        f"{paths.LOGS}/paper/forest_plot.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        code=code("paper_forest_plot.py"),
        contrasts=MAIN_CONTRASTS,
    script:
        "../scripts/paper_forest_plot.py"


rule report_front:
    input:
        table=paths.table("main", "html"),
        table_caption="report/main_table.rst",
        ranking=paths.table("ranking", "html"),
        ranking_caption="report/ranking_table.rst",
        figure=paths.figure("contrasts", "png"),
        figure_caption="report/forest_plot.rst",
        notice=paths.PAPER_NOTICE_TEXT,
        # the records each row links to
        verdicts=expand(paths.VERDICT, contrast=FRONT_ROWS["contrasts"]),
        contrasts=expand(paths.CONTRAST, contrast=FRONT_ROWS["contrasts"]),
        summaries=expand(
            paths.RUN_SUMMARY,
            run=sorted({r for pair in FRONT_ROWS["contrasts"].values() for r in pair}),
        ),
    output:
        html=report(
            paths.REPORT_FRONT,
            caption="../report/front.rst",
            category="Overview",
        ),
    log:
        f"{paths.LOGS}/paper/report_front.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        code=code("report_front.py"),
        rows=FRONT_ROWS,
        # what the main table's caption counts (report/main_table.rst), as that table's rule
        runs=MAIN_RUNS,
        contrasts=MAIN_CONTRASTS,
    script:
        "../scripts/report_front.py"


rule paper_ranking_table:
    input:
        summaries=expand(paths.RUN_SUMMARY, run=RANKING_ARMS),
        vs_free=expand(paths.VERDICT, contrast=PLAN.ranking_vs_free()),
        pairwise=expand(paths.VERDICT, contrast=list(RANKING_PAIRWISE)),
        beta=paths.fill(paths.GATE_BETA, gate=GATE),
        family=paths.fill(paths.VERDICT_FAMILY, table="ranking"),
    output:
        tex=paths.table("ranking", "tex"),
        csv=paths.table("ranking", "csv"),
        csv_contrasts=paths.table("ranking_contrasts", "csv"),
        csv_betas=paths.table("ranking_betas", "csv"),
        md=paths.table("ranking", "md"),
        html=report(
            paths.table("ranking", "html"),
            caption="../report/ranking_table.rst",
            category="Tables",
        ),
    log:
        f"{paths.LOGS}/paper/ranking_table.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        code=code("paper_ranking_table.py", templates=["ranking_table.tex.j2"]),
        arms=[
            arm.as_json() | {"run": arm.run, "label": arm.label, "vs_free": vs_free}
            for arm, vs_free in zip(PLAN.paper_arms, PLAN.ranking_vs_free())
        ],
        vs_free=PLAN.ranking_vs_free(),
        pairwise=list(RANKING_PAIRWISE),
    script:
        "../scripts/paper_ranking_table.py"


rule paper_beta_plot:
    input:
        beta=paths.fill(paths.GATE_BETA, gate=GATE),
        truth_check=branch(
            IS_DEFAULT_WORLD,
            then=paths.fill(paths.GATE_TRUTH_CHECK, gate=GATE),
            otherwise=[],
        ),
    output:
        pdf=paths.figure("gate_betas", "pdf"),
        png=report(
            paths.figure("gate_betas", "png"),
            caption="../report/beta_plot.rst",
            category="Figures",
        ),
    log:
        f"{paths.LOGS}/paper/beta_plot.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        code=code("paper_beta_plot.py"),
    script:
        "../scripts/paper_beta_plot.py"


rule paper:
    input:
        rules.paper_notice.output,
        rules.report_front.output,
        rules.paper_main_table.output,
        rules.paper_forest_plot.output,
        rules.paper_ranking_table.output,
        rules.paper_beta_plot.output,
        expand(
            paths.TABLE,
            table=[f"ablation_{bench}" for bench in MATRIX.benchmarks] + ["harness"],
            ext=paths.TABLE_FORMATS,
        ),
        rules.ablation_figures.output,
        rules.paper_ablation_section.output,
        rules.ablation_splits.output,
        rules.audit_weight_diff.output,


rule paper_pdf:
    input:
        tex="paper/main.tex",
        parts=rules.paper.input,
    output:
        pdf=paths.PAPER_PDF,
        layout=paths.PAPER_LAYOUT,
    log:
        f"{paths.LOGS}/paper/main_pdf.log",
    conda:
        "../envs/latex.yaml"
    params:
        code=code("paper_pdf.py"),
        build_dir=paths.PAPER_BUILD,
    script:
        "../scripts/paper_pdf.py"


# A build of the paper ends by saying where its results are (a job of its own would cost a
# process start; Snakemake calls onsuccess in its own process, never on a dry run or inside
# a cluster job).
onsuccess:
    if targets_rule(workflow, "paper"):
        print(where_results(), file=sys.stderr)
