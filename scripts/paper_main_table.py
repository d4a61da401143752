from skilleval.logs import logged
from skilleval.report.tables import render_main_table

with logged(snakemake.log[0], snakemake):
    render_main_table(
        dict(zip(snakemake.params.runs, snakemake.input.summaries, strict=True)),
        dict(zip(snakemake.params.contrasts, snakemake.input.verdicts, strict=True)),
        snakemake.params.descriptions,
        snakemake.input.family,
        dict(snakemake.output.items()),
    )
