from skilleval.checkpoints.diff import build_weight_diff
from skilleval.logs import logged

with logged(snakemake.log[0], snakemake):
    build_weight_diff(
        snakemake.input.base,
        snakemake.input.final,
        snakemake.output.diff,
        snakemake.output.pdf,
        snakemake.output.png,
        (snakemake.params.names["base"], snakemake.params.names["final"]),
        snakemake.params.device,
    )
