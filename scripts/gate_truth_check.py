from skilleval.analysis.ranking import truth_check
from skilleval.logs import logged

with logged(snakemake.log[0], snakemake):
    truth_check(
        snakemake.input.beta,
        snakemake.input.truth,
        snakemake.params.checkpoint,
        snakemake.params.bank,
        "val",
        snakemake.output.check,
    )
