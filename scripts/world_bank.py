from pathlib import Path

from skilleval.logs import logged
from skilleval.world.design import BankDesign
from skilleval.world.generate import write_bank

with logged(snakemake.log[0], snakemake):
    write_bank(
        snakemake.params.seed,
        snakemake.wildcards.bank,
        Path(snakemake.output.bank),
        BankDesign(**snakemake.params.design),
    )
