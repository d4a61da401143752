from skilleval.ablation.tables import benchmark_legend
from skilleval.logs import logged

with logged(snakemake.log[0]):
    benchmark_legend(snakemake.input.matrix, snakemake.output.pdf)
