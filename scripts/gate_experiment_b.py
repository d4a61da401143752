from pathlib import Path

from skilleval.analysis.gate import run_dirs
from skilleval.analysis.ranking import experiment_b
from skilleval.logs import logged

with logged(snakemake.log[0], snakemake):
    experiment_b(
        snakemake.input.beta,
        snakemake.input.design,
        str(Path(snakemake.input.bare[0]).parent),
        run_dirs(snakemake.params.fresh, snakemake.input.fresh),
        snakemake.params.n_resamples,
        snakemake.params.seed,
        snakemake.output.result,
    )
