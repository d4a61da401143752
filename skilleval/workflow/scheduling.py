"""What a model run's job asks of the scheduler: its cards, a cluster job's CPUs, memory
and time (serving.sizing), and its priority. rules/common.smk builds one
:class:`RunScheduling` and passes its bound methods to ``resources:`` and ``priority:``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skilleval import paths
from skilleval.checkpoints.layout import shard_paths
from skilleval.serving.gpu import cards_for
from skilleval.serving.sizing import JobSize, run_job_size
from skilleval.workflow.plan import RunPlan, WorkflowPlan

Wildcards = Any  # snakemake.io.Wildcards: attribute access to the job's wildcard values

# The priority of the jobs between the first model runs and the ranking arms (masked and
# bare val runs, the betas, the frozen banks): the paper's longest chain of GPU work.
GATE_CHAIN_PRIORITY = 1


def run_of(plan: WorkflowPlan, wildcards: Wildcards) -> RunPlan:
    """The run a job of eval_run (``run``) or gate_masked_run (``masked``) computes."""
    if hasattr(wildcards, "masked"):
        return plan.masked[wildcards.masked]
    return plan.runs[wildcards.run]


class RunScheduling:
    """What a model run's job asks of the scheduler: cards, a cluster job's CPUs, memory
    and time (serving.sizing), and its priority."""

    def __init__(self, plan: WorkflowPlan) -> None:
        self.plan = plan
        # Snakemake asks for each resource of a job on its own; one size per run serves all.
        self._sizes: dict[str, JobSize] = {}
        # The runs whose results choose other runs' skill banks: the bare val run and Gate
        # A's masked runs give the betas that freeze the ranking arms' banks.
        masked = (plan.masked[m].name for m in plan.designs["design"].runs)
        self.runs_that_choose_banks = frozenset({plan.ranking.bare_val_run, *masked})

    def _run(self, wildcards: Wildcards) -> RunPlan:
        return run_of(self.plan, wildcards)

    def run_gpus(self, wildcards: Wildcards) -> int:
        protocol = self.plan.config.protocols[self._run(wildcards).protocol]
        served = protocol.model_server
        return cards_for(self.plan.config.backends.model_server, served.tp, served.dp_size)

    def _job_size(self, wildcards: Wildcards) -> JobSize:
        run = self._run(wildcards)
        if run.name not in self._sizes:
            if hasattr(wildcards, "masked"):
                summary = paths.fill(
                    paths.GATE_RUN_SUMMARY, gate=self.plan.gate, masked=wildcards.masked
                )
            else:
                summary = paths.fill(paths.RUN_SUMMARY, run=run.name)
            # The weights count only when the job launches a server to load them.
            launches = self.run_gpus(wildcards) > 0
            inputs = self.plan.run_inputs(run)
            weights = shard_paths(inputs.checkpoint_path) if launches else []
            self._sizes[run.name] = run_job_size(
                self.plan.config.backends.model_server,
                inputs.model_server(),
                weights,
                Path(summary),
            )
        return self._sizes[run.name]

    def run_cpus(self, wildcards: Wildcards) -> int:
        return self._job_size(wildcards).cpus_per_task

    def run_mem_mb(self, wildcards: Wildcards) -> int:
        return self._job_size(wildcards).mem_mb

    def run_runtime(self, wildcards: Wildcards) -> int:
        return self._job_size(wildcards).runtime

    def run_priority(self, wildcards: Wildcards) -> int:
        """Snakemake's job priority of a run: the runs that choose banks go first, so the
        ranking arms can start while the other runs still fill the cards, instead of
        running last on a host whose other cards are idle (bench_gpu_phase.py)."""
        chooses = self._run(wildcards).name in self.runs_that_choose_banks
        return GATE_CHAIN_PRIORITY if chooses else 0
