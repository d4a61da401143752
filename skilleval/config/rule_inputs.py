"""Input functions of the rules: each takes Snakemake's ``wildcards`` and answers from the plan.

rules/common.smk builds one :class:`RuleInputs` and passes its bound methods to ``input:``,
``params:`` and ``resources:``, so the Snakefile holds no logic of its own.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from skilleval import paths
from skilleval.ablation.plan import PlannedRun, audit_path, plan_fingerprint
from skilleval.ablation.plan import plan as plan_matrix
from skilleval.checkpoints.files import shard_paths
from skilleval.config.plan import RunPlan, WorkflowPlan
from skilleval.runs.inputs import RunInputs
from skilleval.serving.gpu import cards_for

Wildcards = Any  # snakemake.io.Wildcards: attribute access to the job's wildcard values


class RuleInputs:
    def __init__(self, plan: WorkflowPlan, matrix: dict[str, Any]) -> None:
        self.plan = plan
        self.matrix = matrix
        self.ablation_runs: dict[str, PlannedRun] = {run.run_id: run for run in plan_matrix(matrix)}

    # evaluation runs ---------------------------------------------------------

    def _run(self, wildcards: Wildcards) -> RunPlan:
        if hasattr(wildcards, "masked"):
            return self.plan.masked[wildcards.masked]
        return self.plan.runs[wildcards.run]

    def run_inputs(self, wildcards: Wildcards) -> RunInputs:
        return self.plan.run_inputs(self._run(wildcards))

    def run_files(self, wildcards: Wildcards) -> dict[str, str]:
        """The files a run reads, by role (checkpoint, split file, bank, design, catalogue)."""
        inputs = self.run_inputs(wildcards)
        files = {"checkpoint": inputs.checkpoint_path, "split_file": inputs.split_file}
        if inputs.bank_path:
            files["bank"] = inputs.bank_path
        if inputs.mask_path:
            files["design"] = inputs.mask_path
        if inputs.backends["environment"] == "shopsim":
            files["catalogue"] = inputs.catalogue
        return files

    def run_params(self, wildcards: Wildcards) -> dict[str, Any]:
        return asdict(self.run_inputs(wildcards))

    def run_gpus(self, wildcards: Wildcards) -> int:
        protocol = self.plan.config["protocols"][self._run(wildcards).protocol]
        return cards_for(self.plan.config["backends"]["model_server"], protocol["model_server"])

    # gate and ranking --------------------------------------------------------

    def design_params(self, wildcards: Wildcards) -> dict[str, Any]:
        design = self.plan.designs[wildcards.design]
        bare = self.plan.run_inputs(self.plan.runs[self.plan.ranking["bare_val_run"]])
        return {
            "split_file": bare.split_file,
            "split": bare.split,
            "runs": design.runs,
            "probability": self.plan.ranking["inclusion_probability"],
            "seed": design.seed,
        }

    def _masked_summaries(self, design: str) -> list[str]:
        return [
            paths.fill(paths.GATE_RUN_SUMMARY, gate=self.plan.gate, masked=masked)
            for masked in self.plan.designs[design].runs
        ]

    def gate_summaries(self, wildcards: Wildcards) -> list[str]:
        return self._masked_summaries("design")

    def experiment_b_summaries(self, wildcards: Wildcards) -> list[str]:
        return self._masked_summaries("design-b")

    def frozen_arm(self, wildcards: Wildcards) -> dict[str, Any]:
        return self.plan.arms[wildcards.arm].as_json()

    # contrasts ---------------------------------------------------------------

    @staticmethod
    def run_outputs(run: str) -> list[str]:
        return [paths.fill(paths.RUN_SUMMARY, run=run), paths.fill(paths.RUN_RESULTS, run=run)]

    def contrast_control(self, wildcards: Wildcards) -> list[str]:
        return self.run_outputs(self.plan.contrasts[wildcards.contrast].control)

    def contrast_treatment(self, wildcards: Wildcards) -> list[str]:
        return self.run_outputs(self.plan.contrasts[wildcards.contrast].treatment)

    def contrast_spec(self, wildcards: Wildcards) -> dict[str, Any]:
        return self.plan.contrasts[wildcards.contrast].as_json()

    def contrast_audits(self, wildcards: Wildcards) -> list[str]:
        contrast = self.plan.contrasts[wildcards.contrast]
        return [
            paths.fill(paths.CHECKPOINT_AUDIT, ckid=self.plan.checkpoint_id(run))
            for run in (contrast.control, contrast.treatment)
        ]

    # the embedded default world ----------------------------------------------

    def world_checkpoints(self) -> dict[str, str]:
        return {name: c["path"] for name, c in self.plan.config["checkpoints"].items()}

    def world_banks(self) -> dict[str, str]:
        return {name: b["path"] for name, b in self.plan.config["banks"].items()}

    def ground_truth_reference(self) -> dict[str, Any]:
        """The protocol the ground truth is computed under: that of the bare test run."""
        bare = self.plan.runs[self.plan.ranking["bare_test_run"]]
        protocol = self.plan.config["protocols"][bare.protocol]
        return {
            "temperature": protocol["sampling"]["temperature"],
            "max_steps": protocol["runtime"]["max_steps"],
            "splits": ["val", "test"],
        }

    # checkpoints -------------------------------------------------------------

    def checkpoint_weights(self, wildcards: Wildcards) -> str:
        return str(self.plan.checkpoint_by_id(wildcards.ckid)["path"])

    def checkpoint_shards(self, wildcards: Wildcards) -> list[str]:
        """Every shard an index file names, so a changed shard re-runs the audit."""
        weights = self.checkpoint_weights(wildcards)
        if not weights.endswith(".index.json") or not Path(weights).exists():
            return []
        return [str(shard) for shard in shard_paths(weights)]

    # ablations ---------------------------------------------------------------

    def split_pool(self, wildcards: Wildcards) -> int:
        return int(self.matrix["benchmarks"][wildcards.bench]["pool"])

    def ablation_fingerprint(self, wildcards: Wildcards) -> str:
        return plan_fingerprint(self.ablation_runs[wildcards.run_id], self.matrix)

    def memory_heavy(self, wildcards: Wildcards) -> int:
        return int(self.matrix["benchmarks"][wildcards.bench]["memory_heavy"])

    def _ablation_files(self, benchmarks: set[str], harness: bool) -> list[str]:
        return [
            path
            for run in self.ablation_runs.values()
            if run.benchmark in benchmarks and bool(run.harness) == harness
            for path in (run.summary_path, audit_path(run))
        ]

    def ablation_table_files(self, wildcards: Wildcards) -> list[str]:
        return self._ablation_files({wildcards.bench}, harness=False)

    def ablation_figure_files(self, wildcards: Wildcards) -> list[str]:
        benchmarks = set(self.matrix["groups"][wildcards.group]["benchmarks"])
        return self._ablation_files(benchmarks, harness=False)

    def harness_files(self, wildcards: Wildcards) -> list[str]:
        return self._ablation_files(set(self.matrix["benchmarks"]), harness=True)
