from skilleval.ablation.splits import write_splits
from skilleval.logs import logged

with logged(snakemake.log[0], snakemake):
    write_splits(snakemake.params.pools, snakemake.params.ratios, snakemake.output.splits)
