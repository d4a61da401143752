from skilleval.logs import logged
from skilleval.ranking import write_design

with logged(snakemake.log[0]):
    write_design(snakemake.input.bank, output=snakemake.output.design, **snakemake.params.design)
