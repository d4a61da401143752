from pathlib import Path

from skilleval.analysis.gate import build_beta, run_dirs
from skilleval.logs import logged

with logged(snakemake.log[0], snakemake):
    build_beta(
        str(Path(snakemake.input.bare[0]).parent),
        run_dirs(snakemake.params.masked, snakemake.input.masked),
        snakemake.input.design,
        snakemake.input.bank,
        snakemake.params.k,
        snakemake.output.beta,
        snakemake.params.history,
    )
