from skilleval.ablation.tables import ablation_figures
from skilleval.logs import logged

with logged(snakemake.log[0], snakemake):
    ablation_figures(
        snakemake.input.matrix,
        snakemake.params.groups,
        snakemake.output.pdfs,
        snakemake.output.pngs,
        snakemake.output.legend,
    )
