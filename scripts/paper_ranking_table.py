from skilleval.logs import logged
from skilleval.report.ranking_table import render_ranking_table

with logged(snakemake.log[0], snakemake):
    params, inputs = snakemake.params, snakemake.input
    render_ranking_table(
        params.arms,
        list(inputs.summaries),
        list(inputs.vs_free),
        dict(zip(params.pairwise, inputs.pairwise, strict=True)),
        inputs.beta,
        snakemake.input.family,
        dict(snakemake.output.items()),
    )
