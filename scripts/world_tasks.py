from pathlib import Path

from skilleval.logs import logged
from skilleval.world.generate import write_tasks

with logged(snakemake.log[0], snakemake):
    world = snakemake.params.world
    write_tasks(
        world["seed"],
        world["categories"],
        world["products_per_category"],
        world["split_sizes"],
        Path(snakemake.output.catalogue),
        Path(snakemake.output.splits),
    )
