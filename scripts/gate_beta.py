from skilleval.analysis.gate import build_beta
from skilleval.logs import logged
from skilleval.paths import RunFiles

with logged(snakemake.log[0], snakemake):
    build_beta(
        RunFiles(*snakemake.input.bare),
        RunFiles.by_run(snakemake.params.masked, snakemake.input.masked),
        snakemake.input.design,
        snakemake.input.bank,
        snakemake.params.k,
        snakemake.output.beta,
        snakemake.params.history,
    )
