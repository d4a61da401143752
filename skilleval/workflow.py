"""Resolving config into the inputs and params of rules (used by rules/common.smk).

Kept in the package so the Snakefile stays declarative and the mapping is unit-tested.
Declared runs and contrasts come from config; the ranking arms (memo §2 C) and their
contrasts are derived from the ``ranking`` section by fixed rules.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from skilleval.config import run_specs
from skilleval.inputs import RunInputs, masked_run_names


@dataclass(frozen=True)
class RunPlan:
    name: str
    experiment: str
    protocol: str
    checkpoint: str
    bank_name: str | None
    bank_path: str | None
    bank_chunks: int | None
    split: str
    mask_path: str | None = None
    mask_run: str | None = None


class WorkflowConfig:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.world_dir: str = config["world"]["dir"]
        self.ranking: dict[str, Any] = config["ranking"]
        self.gate: str = self.ranking["gate"]
        self.plans: dict[str, RunPlan] = {}
        for name, spec in run_specs(config).items():
            bank = config["banks"][spec.bank] if spec.bank else None
            self.plans[name] = RunPlan(
                name,
                spec.experiment,
                spec.protocol,
                spec.checkpoint,
                spec.bank,
                bank["path"] if bank else None,
                bank["chunks"] if bank else None,
                spec.split,
            )
        self.rank_arms = self._ranking_arms()
        self.plans.update(self.rank_arms)
        self.contrasts: dict[str, dict[str, Any]] = {
            **{n: {**c, "table": "main"} for n, c in config["contrasts"].items()},
            **self._ranking_contrasts(),
        }

    # ranking -----------------------------------------------------------------

    def bank_file(self, rule: str, seed: int | None = None) -> str:
        k = self.ranking["k"]
        suffix = f"-{seed}" if seed is not None else ""
        return f"results/banks/{self.gate}/{rule}-{k}{suffix}.json"

    def arm_name(self, rule: str, seed: int | None = None) -> str:
        return f"rank-{rule}-{self.ranking['k']}" + (f"-{seed}" if seed is not None else "")

    def _ranking_arms(self) -> dict[str, RunPlan]:
        bare = self.plans[self.ranking["bare_test_run"]]
        stem = bare.experiment.removesuffix("-free")
        arms = [("top", None), ("bottom", None)]
        arms += [("random", seed) for seed in self.ranking["random_seeds"]]
        plans = {}
        for rule, seed in arms:
            name = self.arm_name(rule, seed)
            plans[name] = RunPlan(
                name,
                f"{stem}-{name}",
                bare.protocol,
                bare.checkpoint,
                f"{self.gate}/{rule}",
                self.bank_file(rule, seed),
                self.ranking["k"],
                bare.split,
            )
        return plans

    def _ranking_contrasts(self) -> dict[str, dict[str, Any]]:
        free = self.ranking["bare_test_run"]
        top, bottom = self.arm_name("top"), self.arm_name("bottom")
        paper_seeds = self.ranking["random_seeds_in_paper"]
        contrasts: dict[str, dict[str, Any]] = {
            "rank-top-vs-free": self._contrast(free, top, "Top-K vs free"),
            "rank-bottom-vs-free": self._contrast(free, bottom, "Bottom-K vs free"),
        }
        for seed in self.ranking["random_seeds"]:
            suffix = "" if seed == paper_seeds[0] else f"-{seed}"
            table = "ranking" if seed in paper_seeds else "extra"
            random = self.arm_name("random", seed)
            contrasts[f"rank-random{suffix}-vs-free"] = self._contrast(
                free, random, f"Random-K (seed {seed}) vs free", table
            )
            contrasts[f"rank-top-vs-random{suffix}"] = self._contrast(
                random, top, f"Top-K vs Random-K (seed {seed})", table
            )
            contrasts[f"rank-random{suffix}-vs-bottom"] = self._contrast(
                bottom, random, f"Random-K (seed {seed}) vs Bottom-K", table
            )
        contrasts["rank-top-vs-bottom"] = self._contrast(bottom, top, "Top-K vs Bottom-K")
        return contrasts

    @staticmethod
    def _contrast(
        control: str, treatment: str, description: str, table: str = "ranking"
    ) -> dict[str, Any]:
        return {
            "control": control,
            "treatment": treatment,
            "causal": True,
            "description": description,
            "table": table,
        }

    def design_file(self, experiment: str = "gate") -> str:
        return f"results/gate/{self.gate}/{'design' if experiment == 'gate' else 'design-b'}.json"

    def masked_runs(self, experiment: str = "gate") -> list[str]:
        if experiment == "gate":
            return masked_run_names(self.ranking["masked_runs"])
        return masked_run_names(self.ranking["experiment_b"]["masked_runs"], prefix="fresh")

    def masked_plan(self, masked: str) -> RunPlan:
        bare = self.plans[self.ranking["bare_val_run"]]
        bank = self.config["banks"][self.ranking["bank"]]
        experiment = "gate" if masked.startswith("masked") else "b"
        return RunPlan(
            f"gate-{self.gate}-{masked}",
            f"{bare.experiment}-gate-{self.gate}-{masked}",
            bare.protocol,
            bare.checkpoint,
            self.ranking["bank"],
            bank["path"],
            bank["chunks"],
            bare.split,
            self.design_file(experiment),
            masked,
        )

    # rule inputs and params --------------------------------------------------

    def _inputs(self, plan: RunPlan) -> RunInputs:
        protocol = self.config["protocols"][plan.protocol]
        checkpoint = self.config["checkpoints"][plan.checkpoint]
        return RunInputs(
            run=plan.name,
            experiment=plan.experiment,
            protocol_name=plan.protocol,
            protocol=protocol,
            checkpoint_id=checkpoint["checkpoint_id"],
            checkpoint_path=checkpoint["path"],
            checkpoint_expected_fingerprint=checkpoint["fingerprint"],
            bank_name=plan.bank_name,
            bank_path=plan.bank_path,
            bank_chunks=plan.bank_chunks,
            split_file=protocol["tasks"]["split_file"],
            split=plan.split,
            backends=dict(self.config["backends"]),
            catalogue=f"{self.world_dir}/catalogue.json",
            mask_path=plan.mask_path,
            mask_run=plan.mask_run,
        )

    def run_inputs_object(self, run: str) -> RunInputs:
        return self._inputs(self.plans[run])

    def run_inputs(self, run: str) -> dict[str, Any]:
        return asdict(self.run_inputs_object(run))

    def masked_inputs(self, masked: str) -> dict[str, Any]:
        return asdict(self._inputs(self.masked_plan(masked)))

    def input_files(self, inputs: RunInputs) -> dict[str, str]:
        files = {"checkpoint": inputs.checkpoint_path, "split_file": inputs.split_file}
        if inputs.bank_path:
            files["bank"] = inputs.bank_path
        if inputs.mask_path:
            files["design"] = inputs.mask_path
        if inputs.backends["environment"] == "shopsim":
            files["catalogue"] = inputs.catalogue
        return files

    def run_input_files(self, run: str) -> dict[str, str]:
        return self.input_files(self.run_inputs_object(run))

    def masked_input_files(self, masked: str) -> dict[str, str]:
        return self.input_files(self._inputs(self.masked_plan(masked)))

    def run_files(self, run: str) -> list[str]:
        return [f"results/runs/{run}/summary.json", f"results/runs/{run}/results.jsonl"]

    def contrast_run_files(self, contrast: str, role: str) -> list[str]:
        return self.run_files(self.contrasts[contrast][role])

    def contrasts_for(self, table: str) -> list[str]:
        return [n for n, c in self.contrasts.items() if c["table"] == table]

    def main_runs(self) -> list[str]:
        runs: list[str] = []
        for name in self.contrasts_for("main"):
            for role in ("control", "treatment"):
                if self.contrasts[name][role] not in runs:
                    runs.append(self.contrasts[name][role])
        return runs

    def ranking_paper_arms(self) -> list[str]:
        seeds = self.ranking["random_seeds_in_paper"]
        return [
            self.arm_name("top"),
            *(self.arm_name("random", s) for s in seeds),
            self.arm_name("bottom"),
        ]

    def world_checkpoint_files(self) -> dict[str, str]:
        return {name: c["path"] for name, c in self.config["checkpoints"].items()}

    def world_bank_files(self) -> dict[str, str]:
        return {name: b["path"] for name, b in self.config["banks"].items()}

    def ground_truth_reference(self) -> dict[str, Any]:
        """The protocol the ground truth is computed under: that of the bare test run."""
        plan = self.plans[self.ranking["bare_test_run"]]
        protocol = self.config["protocols"][plan.protocol]
        return {
            "temperature": protocol["sampling"]["temperature"],
            "max_steps": protocol["runtime"]["max_steps"],
            "splits": ["val", "test"],
        }

    def design_params(self, design: str) -> dict[str, Any]:
        bare = self.plans[self.ranking["bare_val_run"]]
        protocol = self.config["protocols"][bare.protocol]
        experiment = self.ranking if design == "design" else self.ranking["experiment_b"]
        return {
            "split_file": protocol["tasks"]["split_file"],
            "split": bare.split,
            "n_runs": experiment["masked_runs"],
            "probability": self.ranking["inclusion_probability"],
            "seed": experiment["design_seed"],
            "prefix": "masked" if design == "design" else "fresh",
        }

    def freeze_params(self, arm: str) -> dict[str, Any]:
        """'top-4', 'bottom-4' or 'random-4-20260907' -> selection rule, k and seed."""
        rule, k, *seed = arm.split("-")
        if int(k) != self.ranking["k"] or rule not in ("top", "bottom", "random"):
            raise ValueError(f"no frozen bank {arm!r}; K is {self.ranking['k']}")
        return {"rule": rule, "k": int(k), "seed": int(seed[0]) if seed else None}

    def ranking_vs_free(self) -> list[str]:
        """Verdict names of the paper arms against free, in ranking_paper_arms() order."""
        seeds = self.ranking["random_seeds_in_paper"]
        random = [f"rank-random{'' if s == seeds[0] else f'-{s}'}-vs-free" for s in seeds]
        return ["rank-top-vs-free", *random, "rank-bottom-vs-free"]

    def ranking_pairwise(self) -> list[str]:
        return ["rank-top-vs-bottom", "rank-top-vs-random", "rank-random-vs-bottom"]

    def gpus_for(self, protocol: str) -> int:
        """Cards a run's job leases: sglang's tp x dp when the job launches the server."""
        if self.config["backends"]["model_server"] not in ("process", "docker"):
            return 0
        server = self.config["protocols"][protocol]["model_server"]
        return int(server["tp"] or 1) * int(server["dp_size"] or 1)

    def gpu_requests(self) -> dict[str, int]:
        return {
            f"runs of protocol {name}": self.gpus_for(name) for name in self.config["protocols"]
        }

    def checkpoint_by_id(self, checkpoint_id: str) -> dict[str, Any]:
        return next(
            c for c in self.config["checkpoints"].values() if c["checkpoint_id"] == checkpoint_id
        )

    def shard_stats(self, checkpoint_id: str) -> dict[str, Any]:
        """Size and mtime of every shard, so a changed or deleted shard re-runs the audit."""
        import json
        from pathlib import Path

        weights = Path(self.checkpoint_by_id(checkpoint_id)["path"])
        if not weights.exists():
            return {}
        names = (
            sorted(set(json.loads(weights.read_text()).get("weight_map", {}).values()))
            if weights.name.endswith(".index.json")
            else [weights.name]
        )
        stats: dict[str, Any] = {}
        for name in names:
            shard = weights.parent / name
            stats[name] = [shard.stat().st_size, shard.stat().st_mtime] if shard.exists() else None
        return stats

    def audit_file(self, run: str) -> str:
        checkpoint = self.config["checkpoints"][self.plans[run].checkpoint]
        return f"results/audit/checkpoints/{checkpoint['checkpoint_id']}.json"

    def contrast_audit_files(self, contrast: str) -> dict[str, str]:
        spec = self.contrasts[contrast]
        return {role: self.audit_file(spec[role]) for role in ("control", "treatment")}
