from pathlib import Path

from skilleval.analysis.contrast import build_contrast
from skilleval.logs import logged

with logged(snakemake.log[0], snakemake):
    build_contrast(
        snakemake.wildcards.contrast,
        snakemake.params.spec,
        snakemake.params.statistics,
        str(Path(snakemake.input.control[0]).parent),
        str(Path(snakemake.input.treatment[0]).parent),
        snakemake.output.contrast,
        audits=list(snakemake.input.audits),
    )
