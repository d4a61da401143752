from skilleval.logs import logged
from skilleval.report.ablation_tables import render_harness_table

with logged(snakemake.log[0], snakemake):
    render_harness_table(snakemake.input.matrix, dict(snakemake.output.items()))
