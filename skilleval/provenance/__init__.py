"""Where results come from and when they are stale: provenance records, code fingerprints,
content digests of inputs, the stale report (Snakemake's dry run, explained), archiving."""
