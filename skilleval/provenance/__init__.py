"""Where results come from: provenance records, what is stale and why, archiving runs."""
