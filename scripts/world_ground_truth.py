from skilleval.logs import logged
from skilleval.world.build import build_ground_truth

with logged(snakemake.log[0], snakemake):
    build_ground_truth(
        snakemake.input.catalogue,
        snakemake.input.splits,
        dict(zip(snakemake.params.checkpoints, snakemake.input.checkpoints, strict=True)),
        dict(zip(snakemake.params.banks, snakemake.input.banks, strict=True)),
        snakemake.params.reference,
        snakemake.output.truth,
    )
