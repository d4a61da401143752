from skilleval.logs import logged
from skilleval.report.ablation_tables import render_ablation_table

with logged(snakemake.log[0], snakemake):
    render_ablation_table(
        snakemake.wildcards.bench, snakemake.input.matrix, dict(snakemake.output.items())
    )
