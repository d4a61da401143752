from skilleval.logs import logged
from skilleval.runs.evaluation import evaluate
from skilleval.runs.inputs import RunInputs
from skilleval.serving.gpu import export_allowed

with logged(snakemake.log[0], snakemake):
    export_allowed(snakemake.resources.get("gpu_devices"))
    inputs = RunInputs.from_settings(
        snakemake.params.inputs, dict(snakemake.input.items()), snakemake.params.execution
    )
    evaluate(
        inputs,
        snakemake.output.results,
        snakemake.output.summary,
        snakemake.params.journal_root,
        code=snakemake.params.code,
        transcripts_path=snakemake.output.transcripts,
    )
