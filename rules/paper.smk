# Paper tables and figures (memo §4), rendered from verdicts and run summaries.


rule paper_main_table:
    input:
        summaries=expand("results/runs/{run}/summary.json", run=MAIN_RUNS),
        verdicts=expand("results/verdicts/{contrast}.json", contrast=MAIN_CONTRASTS),
    output:
        tex="paper/tables/main.tex",
        csv="paper/tables/main.csv",
        md="paper/tables/main.md",
        html=report(
            "paper/tables/main.html",
            caption="../report/main_table.rst",
            category="Tables",
        ),
    log:
        "results/logs/paper/main_table.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        runs=MAIN_RUNS,
        contrasts=MAIN_CONTRASTS,
    script:
        "../scripts/paper_main_table.py"


rule paper_forest_plot:
    input:
        verdicts=expand("results/verdicts/{contrast}.json", contrast=MAIN_CONTRASTS),
    output:
        pdf="paper/figures/contrasts.pdf",
        png=report(
            "paper/figures/contrasts.png",
            caption="../report/forest_plot.rst",
            category="Figures",
        ),
    log:
        "results/logs/paper/forest_plot.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        contrasts=MAIN_CONTRASTS,
    script:
        "../scripts/paper_forest_plot.py"


rule paper_ranking_table:
    input:
        summaries=expand("results/runs/{run}/summary.json", run=RANKING_ARMS),
        vs_free=expand("results/verdicts/{c}.json", c=WF.ranking_vs_free()),
        pairwise=expand("results/verdicts/{c}.json", c=WF.ranking_pairwise()),
        beta=f"results/gate/{GATE}/beta.json",
    output:
        tex="paper/tables/ranking.tex",
        csv="paper/tables/ranking.csv",
        md="paper/tables/ranking.md",
        html=report(
            "paper/tables/ranking.html",
            caption="../report/ranking_table.rst",
            category="Tables",
        ),
    log:
        "results/logs/paper/ranking_table.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        arms=RANKING_ARMS,
        vs_free=WF.ranking_vs_free(),
        pairwise=WF.ranking_pairwise(),
    script:
        "../scripts/paper_ranking_table.py"


rule paper_beta_plot:
    input:
        beta=f"results/gate/{GATE}/beta.json",
        truth_check=branch(
            IS_DEFAULT_WORLD,
            then=f"results/gate/{GATE}/truth_check.json",
            otherwise=[],
        ),
    output:
        pdf="paper/figures/gate_betas.pdf",
        png=report(
            "paper/figures/gate_betas.png",
            caption="../report/beta_plot.rst",
            category="Figures",
        ),
    log:
        "results/logs/paper/beta_plot.log",
    conda:
        "../envs/skilleval.yaml"
    script:
        "../scripts/paper_beta_plot.py"


rule paper:
    input:
        rules.paper_main_table.output,
        rules.paper_forest_plot.output,
        rules.paper_ranking_table.output,
        rules.paper_beta_plot.output,
        expand(
            "paper/tables/ablation_{bench}.{ext}",
            bench=ABLATION_BENCHMARKS,
            ext=["tex", "csv", "md", "html"],
        ),
        expand("paper/tables/harness.{ext}", ext=["tex", "csv", "md", "html"]),
        expand("paper/figures/ablation_{group}.png", group=ABLATION_GROUPS),
        RATIO_SPLITS,
        rules.audit_weight_diff.output,


rule paper_pdf:
    input:
        tex="paper/main.tex",
        parts=rules.paper.input,
    output:
        pdf="paper/main.pdf",
    log:
        "results/logs/paper/main_pdf.log",
    conda:
        "../envs/latex.yaml"
    script:
        "../scripts/paper_pdf.py"
