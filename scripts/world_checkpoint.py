from pathlib import Path

from skilleval.logs import logged
from skilleval.world.design import CheckpointDesign
from skilleval.world.generate import write_checkpoint

with logged(snakemake.log[0], snakemake):
    design = dict(snakemake.params.design)
    design["logits"] = tuple(design["logits"])
    write_checkpoint(
        snakemake.params.seed,
        snakemake.wildcards.checkpoint,
        Path(snakemake.output.weights),
        CheckpointDesign(**design),
    )
