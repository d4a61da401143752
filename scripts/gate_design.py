from skilleval.analysis.design import write_design
from skilleval.logs import logged

with logged(snakemake.log[0]):
    write_design(snakemake.input.bank, output=snakemake.output.design, **snakemake.params.design)
