from skilleval.logs import logged
from skilleval.world.build import build_ground_truth

with logged(snakemake.log[0]):
    build_ground_truth(
        snakemake.input.catalogue,
        snakemake.input.splits,
        snakemake.params.checkpoints,
        snakemake.params.banks,
        snakemake.params.reference,
        snakemake.output.truth,
    )
