from skilleval.logs import logged
from skilleval.paper import render_ranking_table

with logged(snakemake.log[0]):
    params, inputs = snakemake.params, snakemake.input
    render_ranking_table(
        dict(zip(params.arms, inputs.summaries, strict=True)),
        dict(zip(params.vs_free, inputs.vs_free, strict=True)),
        dict(zip(params.pairwise, inputs.pairwise, strict=True)),
        inputs.beta,
        dict(snakemake.output.items()),
    )
