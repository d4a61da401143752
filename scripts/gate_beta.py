from pathlib import Path

from skilleval.logs import logged
from skilleval.ranking import build_beta

with logged(snakemake.log[0]):
    build_beta(
        str(Path(snakemake.input.bare[0]).parent),
        {
            m: str(Path(p).parent)
            for m, p in zip(snakemake.params.masked, snakemake.input.masked, strict=True)
        },
        snakemake.input.design,
        snakemake.input.bank,
        snakemake.output.beta,
        snakemake.params.archive,
    )
