"""The fastest safe YAML loader available: libyaml's when PyYAML was built with it.

The workflow parses its config and the ablation matrix on every Snakemake start, so
the pure-Python loader's cost shows up in every dry run.
"""

import yaml

SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
