from skilleval.analysis.family import build_family
from skilleval.logs import logged

with logged(snakemake.log[0], snakemake):
    build_family(
        dict(zip(snakemake.params.contrasts, snakemake.input.verdicts, strict=True)),
        snakemake.params.level,
        snakemake.output.family,
    )
