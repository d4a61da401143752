"""The embedded default world (shopsim): catalogue, persona tasks, checkpoints, skill banks."""
