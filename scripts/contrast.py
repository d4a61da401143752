from skilleval.analysis.contrast import build_contrast
from skilleval.config.model import Statistics
from skilleval.logs import logged
from skilleval.paths import RunFiles

with logged(snakemake.log[0], snakemake):
    build_contrast(
        snakemake.wildcards.contrast,
        snakemake.params.spec,
        Statistics.model_validate(snakemake.params.statistics),
        RunFiles(*snakemake.input.control),
        RunFiles(*snakemake.input.treatment),
        snakemake.output.contrast,
        audits=list(snakemake.input.audits),
    )
