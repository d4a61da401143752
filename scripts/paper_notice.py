from skilleval.logs import logged
from skilleval.report.notice import notice_of, write_notice

with logged(snakemake.log[0], snakemake):
    notice = notice_of(list(snakemake.input.runs), list(snakemake.input.ablation))
    write_notice(notice, snakemake.output.tex, snakemake.output.text)
