from skilleval.ablation.tables import render_ablation_table
from skilleval.logs import logged

with logged(snakemake.log[0], snakemake):
    render_ablation_table(
        snakemake.wildcards.bench, snakemake.input.matrix, dict(snakemake.output.items())
    )
