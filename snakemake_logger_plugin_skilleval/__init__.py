"""Snakemake's logger plugin ``skilleval`` (``--logger skilleval``; profiles/default sets
it): one line per finished job with the time left (skilleval.progress.handler)."""

from skilleval.progress.handler import BuildProgressHandler as LogHandler

__all__ = ["LogHandler"]
