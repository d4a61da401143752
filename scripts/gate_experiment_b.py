from skilleval.analysis.ranking import experiment_b
from skilleval.logs import logged
from skilleval.paths import RunFiles

with logged(snakemake.log[0], snakemake):
    experiment_b(
        snakemake.input.beta,
        snakemake.input.design,
        RunFiles(*snakemake.input.bare),
        RunFiles.by_run(snakemake.params.fresh, snakemake.input.fresh),
        snakemake.params.n_resamples,
        snakemake.params.seed,
        snakemake.output.result,
    )
