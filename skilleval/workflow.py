"""Resolving config into the inputs and params of rules (used by rules/common.smk).

Kept in the package so the Snakefile stays declarative and the mapping is unit-tested.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from skilleval.config import RunSpec, run_specs
from skilleval.evaluation import RunInputs


class WorkflowConfig:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.runs: dict[str, RunSpec] = run_specs(config)
        self.world_dir: str = config["world"]["dir"]

    def run_inputs_object(self, run: str) -> RunInputs:
        spec = self.runs[run]
        protocol = self.config["protocols"][spec.protocol]
        checkpoint = self.config["checkpoints"][spec.checkpoint]
        bank = self.config["banks"][spec.bank] if spec.bank else None
        return RunInputs(
            run=run,
            experiment=spec.experiment,
            protocol_name=spec.protocol,
            protocol=protocol,
            checkpoint_id=checkpoint["checkpoint_id"],
            checkpoint_path=checkpoint["path"],
            checkpoint_expected_fingerprint=checkpoint["fingerprint"],
            bank_name=spec.bank,
            bank_path=bank["path"] if bank else None,
            bank_chunks=bank["chunks"] if bank else None,
            split_file=protocol["tasks"]["split_file"],
            split=spec.split,
            backends=dict(self.config["backends"]),
            catalogue=f"{self.world_dir}/catalogue.json",
        )

    def run_inputs(self, run: str) -> dict[str, Any]:
        return asdict(self.run_inputs_object(run))

    def run_input_files(self, run: str) -> dict[str, str]:
        inputs = self.run_inputs_object(run)
        files = {"checkpoint": inputs.checkpoint_path, "split_file": inputs.split_file}
        if inputs.bank_path:
            files["bank"] = inputs.bank_path
        if inputs.backends["environment"] == "shopsim":
            files["catalogue"] = inputs.catalogue
        return files

    def world_checkpoint_files(self) -> dict[str, str]:
        return {name: c["path"] for name, c in self.config["checkpoints"].items()}

    def world_bank_files(self) -> dict[str, str]:
        return {name: b["path"] for name, b in self.config["banks"].items()}

    def ground_truth_reference(self) -> dict[str, Any]:
        """The protocol the ground truth is computed under: that of the first run."""
        protocol = self.config["protocols"][next(iter(self.runs.values())).protocol]
        return {
            "temperature": protocol["sampling"]["temperature"],
            "max_steps": protocol["runtime"]["max_steps"],
            "splits": ["val", "test"],
        }

    def contrast_run_files(self, contrast: str, role: str) -> list[str]:
        run = self.config["contrasts"][contrast][role]
        return [f"results/runs/{run}/summary.json", f"results/runs/{run}/results.jsonl"]
