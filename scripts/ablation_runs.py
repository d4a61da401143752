from skilleval.ablation.run import build_and_audit_all
from skilleval.logs import logged

with logged(snakemake.log[0], snakemake):
    build_and_audit_all(snakemake.input.matrix, snakemake.params.identities, snakemake.params.kept)
