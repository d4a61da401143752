from pathlib import Path

from skilleval.logs import logged
from skilleval.world.generate import write_checkpoint

with logged(snakemake.log[0]):
    write_checkpoint(
        snakemake.params.seed, snakemake.wildcards.checkpoint, Path(snakemake.output.weights)
    )
