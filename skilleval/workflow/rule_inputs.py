"""Input functions of the rules: each takes Snakemake's ``wildcards`` and answers from the plan.

rules/common.smk builds one :class:`RuleInputs` and passes its bound methods to ``input:``,
``params:`` and ``resources:``, so the Snakefile holds no logic of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from skilleval import paths
from skilleval.ablation.plan import (
    PlannedRun,
    audit_path,
    effective_config,
    group_rows,
    plan_fingerprint,
)
from skilleval.ablation.plan import plan as plan_matrix
from skilleval.checkpoints.layout import is_index, resolve_weights, shard_paths
from skilleval.config.matrix import Matrix
from skilleval.errors import ConfigError, SkillevalError
from skilleval.protocol.sections import Execution
from skilleval.provenance.digests import FileDigests, checkout_identity
from skilleval.provenance.identity import trainer_run_identity
from skilleval.runs.inputs import RunInputs
from skilleval.storage.hashing import canonical
from skilleval.workflow.plan import RunPlan, WorkflowPlan
from skilleval.workflow.scheduling import Wildcards, run_of
from skilleval.workflow.snakemake_internals import not_a_rerun_trigger

T = TypeVar("T")

# The sim trainer's jobs (rules/ablation.smk), one per benchmark: ablation_runs_<bench>.
SIM_TRAINER_JOB = "ablation_runs"


class SourceFiles:
    """Inputs the graph does not build: their mtimes are ignored, their contents compared."""

    def __init__(self, built_roots: Sequence[str], file_digests: FileDigests) -> None:
        self.built_roots = [Path(root).parts for root in built_roots]
        self.file_digests = file_digests

    def is_built(self, path: str) -> bool:
        parts = Path(path).parts
        return any(parts[: len(root)] == root for root in self.built_roots)

    def input_file(self, path: str) -> Any:
        """A file the graph builds as it is; another one with its mtime ignored, since
        its content digest in params decides (see provenance.digests)."""
        from snakemake.io import ancient

        return path if self.is_built(path) else ancient(path)

    def digests(self, files: Mapping[str, str]) -> dict[str, str]:
        return {
            role: self.file_digests.digest(path)
            for role, path in files.items()
            if not self.is_built(path)
        }


class RuleInputs:
    def __init__(
        self,
        plan: WorkflowPlan,
        world_digests: Mapping[str, str],
        sources: SourceFiles,
    ) -> None:
        self.plan = plan
        self.world_digests = world_digests
        self.sources = sources

    # evaluation runs ---------------------------------------------------------

    def _run(self, wildcards: Wildcards) -> RunPlan:
        return run_of(self.plan, wildcards)

    def run_inputs(self, wildcards: Wildcards) -> RunInputs:
        return self.plan.run_inputs(self._run(wildcards))

    def _run_paths(self, wildcards: Wildcards) -> dict[str, str]:
        return self.run_inputs(wildcards).files()

    def run_files(self, wildcards: Wildcards) -> dict[str, Any]:
        """The files a run reads, by role (checkpoint, split file, bank, design, catalogue)."""
        return {
            role: self.sources.input_file(path) for role, path in self._run_paths(wildcards).items()
        }

    def run_sources(self, wildcards: Wildcards) -> dict[str, str]:
        """Content digests of the run's inputs the graph does not build."""
        return self.sources.digests(self._run_paths(wildcards))

    def run_execution(self, wildcards: Wildcards) -> Execution:
        """Where the run's servers are and how long they are waited for: given to the job,
        never compared (none of it can change a result)."""
        protocol = self.plan.config.protocols[self._run(wildcards).protocol]
        return not_a_rerun_trigger(protocol.execution)

    def run_params(self, wildcards: Wildcards) -> dict[str, Any]:
        """The run's settings without its file paths: those reach the job as its inputs."""
        return dict(canonical(self.run_inputs(wildcards).settings()))

    # gate and ranking --------------------------------------------------------

    def design_params(self, wildcards: Wildcards) -> dict[str, Any]:
        design = self.plan.designs[wildcards.design]
        bare = self.plan.run_inputs(self.plan.runs[self.plan.ranking.bare_val_run])
        return {
            "probability": self.plan.ranking.inclusion_probability,
            "runs": design.runs,
            "seed": design.seed,
            "split": bare.split,
        }

    def _masked_runs(self, design: str) -> list[str]:
        """The files of a design's masked runs, in paths.RunFiles.by_run's order."""
        return [
            path
            for masked in self.plan.designs[design].runs
            for path in paths.RunFiles(
                paths.fill(paths.GATE_RUN_SUMMARY, gate=self.plan.gate, masked=masked),
                paths.fill(paths.GATE_RUN_RESULTS, gate=self.plan.gate, masked=masked),
            )
        ]

    def gate_runs(self, wildcards: Wildcards) -> list[str]:
        return self._masked_runs("design")

    def experiment_b_runs(self, wildcards: Wildcards) -> list[str]:
        return self._masked_runs("design-b")

    def frozen_arm(self, wildcards: Wildcards) -> dict[str, Any]:
        return self.plan.arms[wildcards.arm].as_json()

    # contrasts ---------------------------------------------------------------

    @staticmethod
    def run_outputs(run: str) -> list[str]:
        """A run's files as a rule's input lists them (paths.RunFiles' order)."""
        return list(
            paths.RunFiles(
                paths.fill(paths.RUN_SUMMARY, run=run), paths.fill(paths.RUN_RESULTS, run=run)
            )
        )

    def contrast_control(self, wildcards: Wildcards) -> list[str]:
        return self.run_outputs(self.plan.contrasts[wildcards.contrast].control)

    def contrast_treatment(self, wildcards: Wildcards) -> list[str]:
        return self.run_outputs(self.plan.contrasts[wildcards.contrast].treatment)

    def contrast_spec(self, wildcards: Wildcards) -> dict[str, Any]:
        return self.plan.contrasts[wildcards.contrast].spec()

    def contrast_audits(self, wildcards: Wildcards) -> list[str]:
        contrast = self.plan.contrasts[wildcards.contrast]
        return [
            paths.fill(paths.CHECKPOINT_AUDIT, ckid=self.plan.checkpoint_id(run))
            for run in (contrast.control, contrast.treatment)
        ]

    # the embedded default world ----------------------------------------------

    def world_checkpoints(self) -> dict[str, str]:
        return {name: c.path for name, c in self.plan.config.checkpoints.items()}

    def world_banks(self) -> dict[str, str]:
        return {name: b.path for name, b in self.plan.config.banks.items()}

    def world_checkpoint_digest(self, wildcards: Wildcards) -> str:
        """What the generator would write for this checkpoint now (see world.digests)."""
        return self.world_digests[f"checkpoint/{wildcards.checkpoint}"]

    def world_sources(self) -> dict[str, str]:
        """Role -> path of every checkpoint and bank the ground truth reads."""
        checkpoints = {f"checkpoint {n}": p for n, p in self.world_checkpoints().items()}
        return {**checkpoints, **{f"bank {n}": p for n, p in self.world_banks().items()}}

    def world_bank_digest(self, wildcards: Wildcards) -> str:
        return self.world_digests[f"bank/{wildcards.bank}"]

    def ground_truth_reference(self) -> dict[str, Any]:
        """The protocol the ground truth is computed under: that of the bare test run."""
        bare = self.plan.runs[self.plan.ranking.bare_test_run]
        protocol = self.plan.config.protocols[bare.protocol]
        return {
            "temperature": protocol.sampling.temperature,
            "max_steps": protocol.runtime.max_steps,
            "splits": ["val", "test"],
        }

    # checkpoints -------------------------------------------------------------

    def _weights(self, wildcards: Wildcards) -> str:
        return str(resolve_weights(self.plan.checkpoint_by_id(wildcards.ckid).path))

    def checkpoint_weights(self, wildcards: Wildcards) -> Any:
        return self.sources.input_file(self._weights(wildcards))

    def checkpoint_shards(self, wildcards: Wildcards) -> list[Any]:
        """Every shard an index file names, so a changed shard re-runs the audit."""
        weights = self._weights(wildcards)
        if not is_index(Path(weights)) or not Path(weights).exists():
            return []
        return [self.sources.input_file(str(shard)) for shard in shard_paths(weights)]

    def checkpoint_sources(self, wildcards: Wildcards) -> dict[str, str]:
        return self.sources.digests({"checkpoint": self._weights(wildcards)})


class AblationInputs:
    """Input functions of the ablation rules, answered from the planned matrix."""

    def __init__(
        self,
        matrix: Matrix,
        matrix_file: str,
        code: Mapping[str, str],
        file_digests: FileDigests,
    ) -> None:
        self.matrix = matrix
        self.matrix_file = matrix_file
        self.code = dict(code)
        self.file_digests = file_digests
        self.ablation_runs: dict[str, PlannedRun] = {run.run_id: run for run in plan_matrix(matrix)}
        trainer = matrix.trainer
        self.checkout: dict[str, str] | None = None
        if trainer.kind == "command":
            # Read once per parse: one git call for the 216 runs.
            self.checkout = self._identified(
                "trainer.root",
                trainer.root,
                lambda: checkout_identity(Path(trainer.root)),
                "point trainer.root at the git checkout of the trainer (its code is "
                "identified by its commit and uncommitted changes)",
            )

    @property
    def split_pools(self) -> dict[str, int]:
        """Benchmark -> its candidate pool, for the benchmarks split by ratio (a pool)."""
        return {b: s.pool for b, s in self.matrix.benchmarks.items() if s.pool}

    @property
    def in_one_job(self) -> bool:
        """The sim trainer takes milliseconds per run: its runs are one job, where a process
        per run would spend nearly all its time starting Python and importing."""
        return self.matrix.trainer.kind == "sim"

    @property
    def benchmarks(self) -> list[str]:
        """The benchmarks that have runs, in plan order: one sim job each."""
        return list(dict.fromkeys(run.benchmark for run in self.ablation_runs.values()))

    def _runs_of(self, bench: str) -> list[PlannedRun]:
        return [run for run in self.ablation_runs.values() if run.benchmark == bench]

    def all_summaries(self) -> list[str]:
        """Every ablation run's summary (the paper's notice reads what built each)."""
        return [run.summary_path for run in self.ablation_runs.values()]

    def run_summaries(self, bench: str) -> list[str]:
        return [run.summary_path for run in self._runs_of(bench)]

    def run_audits(self, bench: str) -> list[str]:
        return [audit_path(run) for run in self._runs_of(bench)]

    def run_identities(self, bench: str) -> dict[str, str]:
        """The evidence identity of each run of one benchmark's sim job, by run id."""
        return {run.run_id: self.identity_of(run.run_id) for run in self._runs_of(bench)}

    def ablation_evidence(self, wildcards: Wildcards) -> dict[str, Any]:
        return self.evidence_of(wildcards.run_id)

    def evidence_of(self, run_id: str) -> dict[str, Any]:
        """What one ablation run's result depends on besides skilleval's code: its
        effective config and, for the command trainer, what that trainer reads: its
        checkout (commit and uncommitted changes), the benchmark config and split folder."""
        run = self.ablation_runs[run_id]
        evidence: dict[str, Any] = {"plan": plan_fingerprint(run, self.matrix)}
        if self.checkout is None:
            return evidence
        root = Path(self.matrix.trainer.root)
        config = effective_config(run, self.matrix)
        where = f"the effective config of run {run.run_id}: "
        return {
            **evidence,
            "trainer_checkout": self.checkout,
            "benchmark_config": self._identified(
                "env.config",
                config["env.config"],
                lambda: self.file_digests.digest(root / str(config["env.config"])),
                f"{where}the trainer reads this file under trainer.root; create it there",
            ),
            "split_dir": self._identified(
                "env.split_dir",
                config["env.split_dir"],
                lambda: self.file_digests.tree(root / str(config["env.split_dir"])),
                f"{where}the trainer reads this folder under trainer.root; create it there",
            ),
        }

    def _identified(self, key: str, value: object, identify: Callable[[], T], fix: str) -> T:
        try:
            return identify()
        except (SkillevalError, OSError) as error:
            raise ConfigError(self.matrix_file, key, value, str(error), fix) from None

    def ablation_identity(self, wildcards: Wildcards) -> str:
        return self.identity_of(wildcards.run_id)

    def identity_of(self, run_id: str) -> str:
        """The run's evidence identity: the key of its kept complete result."""
        return trainer_run_identity(self.code, self.evidence_of(run_id)).digest

    def memory_heavy(self, wildcards: Wildcards) -> int:
        return int(self.matrix.benchmarks[wildcards.bench].memory_heavy)

    def _ablation_files(self, benchmarks: set[str], harness: bool) -> list[str]:
        return [
            path
            for run in self.ablation_runs.values()
            if run.benchmark in benchmarks and bool(run.harness) == harness
            for path in (run.summary_path, audit_path(run))
        ]

    def ablation_table_files(self, wildcards: Wildcards) -> list[str]:
        return self._ablation_files({wildcards.bench}, harness=False)

    def ablation_figure_files(self, groups: Sequence[str]) -> list[str]:
        """The runs of the groups' points only, each once."""
        files: dict[str, None] = {}
        for group in groups:
            for bench in self.matrix.groups[group].benchmarks:
                for _, run_id, _ in group_rows(self.matrix, self.ablation_runs, group, bench):
                    run = self.ablation_runs[run_id]
                    files.update(dict.fromkeys([run.summary_path, audit_path(run)]))
        return list(files)

    def ablation_table_layout(self, wildcards: Wildcards) -> list[tuple[str, str, str, bool]]:
        """(group, value, run id, reused default) rows: what the table shows, not the file."""
        return [
            (group, *row)
            for group, spec in self.matrix.groups.items()
            if wildcards.bench in spec.benchmarks
            for row in group_rows(self.matrix, self.ablation_runs, group, wildcards.bench)
        ]

    def ablation_groups(self, groups: Sequence[str]) -> dict[str, Any]:
        """What the figures draw of each group (their params: a group's edit redraws them)."""
        return {group: canonical(self.matrix.groups[group].settings()) for group in groups}

    def harness_layout(self, wildcards: Wildcards) -> dict[str, Any]:
        return dict(canonical(self.matrix.harness.settings()))

    def harness_files(self, wildcards: Wildcards) -> list[str]:
        return self._ablation_files(set(self.matrix.benchmarks), harness=True)
