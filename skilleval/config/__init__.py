"""The experiment config: schemas (package data), loading with line numbers, cross-field
checks, the execution section's typed model. The workflow plans runs from it
(skilleval.workflow.plan).

Nothing is imported here: a run that reads only the typed execution section must not
import the checks (and the world design they read) into its code identity.
"""
