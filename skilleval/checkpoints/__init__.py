"""Checkpoint files: fingerprints, reading tensors, audits and the weight change."""
