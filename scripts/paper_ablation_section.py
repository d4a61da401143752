from skilleval.logs import logged
from skilleval.report.sections import write_ablation_section

with logged(snakemake.log[0], snakemake):
    write_ablation_section(
        snakemake.params.benchmarks, snakemake.params.groups, snakemake.output.tex
    )
