from skilleval.logs import logged
from skilleval.ranking import freeze_bank

with logged(snakemake.log[0]):
    selection = snakemake.params.selection
    freeze_bank(
        snakemake.input.beta,
        snakemake.input.bank,
        selection["rule"],
        selection["k"],
        selection["seed"],
        snakemake.output.bank,
    )
