from pathlib import Path

from skilleval.logs import logged
from skilleval.ranking import experiment_b, run_dirs

with logged(snakemake.log[0]):
    experiment_b(
        snakemake.input.beta,
        snakemake.input.design,
        str(Path(snakemake.input.bare[0]).parent),
        run_dirs(snakemake.params.fresh, snakemake.input.fresh),
        snakemake.params.n_resamples,
        snakemake.params.seed,
        snakemake.output.result,
    )
