from skilleval.analysis.ranking import freeze_bank
from skilleval.logs import logged

with logged(snakemake.log[0], snakemake):
    selection = snakemake.params.selection
    freeze_bank(
        snakemake.input.beta,
        snakemake.input.bank,
        selection["rule"],
        selection["k"],
        selection["seed"],
        snakemake.output.bank,
        selection["registered"],
    )
