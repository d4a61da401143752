"""skilleval: evaluation and ablation evidence of a skill-learning paper as a build graph."""

from skilleval.logs import is_rule_script, quiet_interrupts

__version__ = "0.1.0"

# A rule script imports the package first: from then on an interrupt ends it in one line.
if is_rule_script():
    quiet_interrupts()
