from skilleval.evaluation import RunInputs, evaluate
from skilleval.gpu import export_allowed
from skilleval.logs import logged

with logged(snakemake.log[0]):
    export_allowed(snakemake.resources.get("gpu_devices"))
    evaluate(
        RunInputs(**snakemake.params.inputs),
        snakemake.output.results,
        snakemake.output.summary,
        snakemake.params.journal_root,
    )
