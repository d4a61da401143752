from pathlib import Path

from skilleval.logs import logged
from skilleval.ranking import experiment_b

with logged(snakemake.log[0]):
    experiment_b(
        snakemake.input.beta,
        snakemake.input.design,
        str(Path(snakemake.input.bare[0]).parent),
        {
            m: str(Path(p).parent)
            for m, p in zip(snakemake.params.fresh, snakemake.input.fresh, strict=True)
        },
        snakemake.params.n_resamples,
        snakemake.params.seed,
        snakemake.output.result,
    )
