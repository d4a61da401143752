from pathlib import Path

from skilleval.logs import logged
from skilleval.ranking import build_beta, run_dirs

with logged(snakemake.log[0]):
    build_beta(
        str(Path(snakemake.input.bare[0]).parent),
        run_dirs(snakemake.params.masked, snakemake.input.masked),
        snakemake.input.design,
        snakemake.input.bank,
        snakemake.output.beta,
        snakemake.params.archive,
    )
