from skilleval.logs import logged
from skilleval.report.ablation_tables import ablation_figures

with logged(snakemake.log[0], snakemake):
    ablation_figures(
        snakemake.input.matrix,
        snakemake.params.groups,
        snakemake.output.pdfs,
        snakemake.output.pngs,
        snakemake.output.legend,
    )
