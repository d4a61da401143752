"""The ablation and harness matrices of memo 003 as a build graph."""
