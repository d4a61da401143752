from skilleval.ablation.tables import render_harness_table
from skilleval.logs import logged

with logged(snakemake.log[0], snakemake):
    render_harness_table(snakemake.input.matrix, dict(snakemake.output.items()))
