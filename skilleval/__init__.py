"""skilleval: evaluation and ablation evidence of a skill-learning paper as a build graph."""

__version__ = "0.1.0"
