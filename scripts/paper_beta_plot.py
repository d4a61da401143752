from skilleval.logs import logged
from skilleval.report.figures import beta_plot

with logged(snakemake.log[0], snakemake):
    truth_check = snakemake.input.truth_check or None
    beta_plot(snakemake.input.beta, truth_check, snakemake.output.pdf, snakemake.output.png)
