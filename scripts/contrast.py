from skilleval.analysis.contrast import build_contrast
from skilleval.logs import logged
from skilleval.paths import RunFiles

with logged(snakemake.log[0], snakemake):
    build_contrast(
        snakemake.wildcards.contrast,
        snakemake.params.spec,
        snakemake.params.statistics,
        RunFiles(*snakemake.input.control),
        RunFiles(*snakemake.input.treatment),
        snakemake.output.contrast,
        audits=list(snakemake.input.audits),
    )
