from skilleval.logs import logged
from skilleval.report.layout import build_checked_pdf

with logged(snakemake.log[0], snakemake):
    build_checked_pdf(
        snakemake.input.tex,
        snakemake.output.pdf,
        snakemake.params.build_dir,
        snakemake.output.layout,
    )
