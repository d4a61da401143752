from skilleval.logs import logged
from skilleval.report.notice import write_notice

with logged(snakemake.log[0]):
    write_notice(snakemake.params.notice, snakemake.output.tex)
