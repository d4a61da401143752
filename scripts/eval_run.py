from skilleval.evaluation import RunInputs, evaluate
from skilleval.logs import logged

with logged(snakemake.log[0]):
    evaluate(
        RunInputs(**snakemake.params.inputs),
        snakemake.output.results,
        snakemake.output.summary,
        snakemake.params.journal_root,
    )
