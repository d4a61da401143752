from skilleval.checkpoints.audit import write_audit
from skilleval.logs import logged

with logged(snakemake.log[0], snakemake):
    write_audit(snakemake.wildcards.ckid, snakemake.input.weights, snakemake.output.audit)
