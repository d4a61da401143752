"""The typed records every layer reads and writes: run summaries, analysis results,
checkpoint audits, ablation summaries, episode types. Nothing here imports a package
above storage, so producer and consumer meet at the bottom (docs/architecture.md)."""
