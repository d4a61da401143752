"""Checkpoints: layouts, headers, fingerprints, exact tensor reading, audits, weight change."""
