"""Everything Snakemake sees: the run plan, the rules' input, params and resource
functions, parse-time checks, and what reads Snakemake's decisions back (stale, archive).
The top layer below the command line (docs/architecture.md)."""
