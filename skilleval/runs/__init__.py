"""Evaluation runs: resolved inputs, the rollout loop, concurrent episodes, journals, summaries."""
