"""A build's progress on the terminal: one line per finished job with the time left
(Snakemake's logger plugin ``skilleval``, set by profiles/default)."""
