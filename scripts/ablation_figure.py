from skilleval.ablation.tables import group_figure
from skilleval.logs import logged

with logged(snakemake.log[0]):
    group_figure(
        snakemake.wildcards.group,
        snakemake.input.matrix,
        snakemake.output.pdf,
        snakemake.output.png,
    )
