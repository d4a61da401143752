"""Statistics on finished runs: paired bootstrap, contrasts, verdicts, Gate A and ranking."""
