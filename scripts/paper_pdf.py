from skilleval.logs import logged
from skilleval.report.latex import compile_pdf

with logged(snakemake.log[0]):
    compile_pdf(snakemake.input.tex, snakemake.output.pdf)
