from skilleval.analysis.design import write_design
from skilleval.logs import logged

with logged(snakemake.log[0], snakemake):
    write_design(
        snakemake.input.bank,
        split_file=snakemake.input.split_file,
        output=snakemake.output.design,
        **snakemake.params.design,
    )
