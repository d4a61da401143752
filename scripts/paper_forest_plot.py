from skilleval.logs import logged
from skilleval.report.figures import forest_plot

with logged(snakemake.log[0], snakemake):
    forest_plot(
        dict(zip(snakemake.params.contrasts, snakemake.input.verdicts, strict=True)),
        snakemake.output.pdf,
        snakemake.output.png,
        "Skill evaluation contrasts",
    )
