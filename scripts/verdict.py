from skilleval.analysis.verdict import build_verdict
from skilleval.logs import logged

with logged(snakemake.log[0], snakemake):
    build_verdict(snakemake.input.contrast, snakemake.output.verdict)
