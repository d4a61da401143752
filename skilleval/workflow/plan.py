"""The run planner: a validated config in, typed runs, arms, masked runs and contrasts out.

Declared runs and contrasts come from config; the ranking arms (memo §2 C) and their
contrasts are derived from the ``ranking`` section by fixed rules. Every object carries
what later code needs, so nothing downstream parses a run or file name.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

from skilleval import paths
from skilleval.config.model import Checkpoint, Config, Ranking, Run
from skilleval.config.model import Contrast as DeclaredContrast
from skilleval.env.adapters import adapter_evidence
from skilleval.runs.inputs import RunInputs

SelectionRule = Literal["top", "bottom", "random"]
# Backends keys that say where a job runs, not what it computes.
NOT_EVIDENCE_BACKENDS = ("jobs_run_on",)
Table = Literal["main", "ranking", "extra"]
# The pairwise ranking contrasts the paper shows, in table order.
RANKING_PAIRWISE = ("rank-top-vs-bottom", "rank-top-vs-random", "rank-random-vs-bottom")


@dataclass(frozen=True)
class BankRef:
    """A skill bank a run injects: a registered bank, or a frozen ranking bank."""

    name: str
    path: str
    chunks: int | None


@dataclass(frozen=True)
class MaskRef:
    """Which mask of a Gate A design a masked run applies, task by task."""

    design: str
    run: str


@dataclass(frozen=True)
class RegisteredBank:
    """A Random-K subset drawn elsewhere (another script, an earlier run) and registered
    as its list of chunk ids: used as listed, never redrawn."""

    chunk_ids: tuple[str, ...]
    drawn_by: str
    note: str

    def as_json(self) -> dict[str, Any]:
        return {"chunk_ids": list(self.chunk_ids), "drawn_by": self.drawn_by, "note": self.note}


@dataclass(frozen=True)
class RankingArm:
    """A frozen bank of K chunks chosen from the signed betas, and its test run."""

    rule: SelectionRule
    k: int
    seed: int | None = None
    registered: RegisteredBank | None = None

    @property
    def stem(self) -> str:
        """File stem of the frozen bank: top-4, bottom-4, random-4-20260907."""
        return f"{self.rule}-{self.k}" + (f"-{self.seed}" if self.seed is not None else "")

    @property
    def run(self) -> str:
        return f"rank-{self.stem}"

    @property
    def label(self) -> str:
        label = f"{self.rule.title()}-{self.k}"
        if self.seed is None:
            return label
        return label + f" (seed {self.seed}, {'registered' if self.registered else 'drawn'})"

    def as_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "k": self.k,
            "seed": self.seed,
            "registered": self.registered.as_json() if self.registered else None,
        }


@dataclass(frozen=True)
class RunPlan:
    """One evaluation run of the graph: declared, a ranking arm or a masked Gate A run."""

    name: str
    experiment: str
    protocol: str
    checkpoint: str
    bank: BankRef | None
    split: str
    mask: MaskRef | None = None
    arm: RankingArm | None = None


@dataclass(frozen=True)
class ContrastPlan:
    name: str
    control: str
    treatment: str
    causal: bool
    description: str
    table: Table
    metric: str = "reward"

    @classmethod
    def declared(cls, name: str, spec: DeclaredContrast) -> ContrastPlan:
        """A contrast of the config's contrasts section (a main-table contrast)."""
        return cls(
            name, spec.control, spec.treatment, spec.causal, spec.description, "main", spec.metric
        )

    def spec(self) -> dict[str, Any]:
        """What the contrast's numbers depend on (not its wording or table)."""
        return {
            "control": self.control,
            "treatment": self.treatment,
            "causal": self.causal,
            "metric": self.metric,
        }


@dataclass(frozen=True)
class MaskDesign:
    """Random inclusion masks over the draft chunks: the gate's, or experiment B's fresh ones."""

    name: Literal["design", "design-b"]
    prefix: Literal["masked", "fresh"]
    n_runs: int
    seed: int

    @property
    def runs(self) -> list[str]:
        return [f"{self.prefix}-{i + 1:02d}" for i in range(self.n_runs)]


def registered_banks(ranking: Ranking) -> dict[int, RegisteredBank]:
    """``ranking.registered_random_banks`` by seed."""
    return {
        entry.seed: RegisteredBank(tuple(entry.chunk_ids), entry.drawn_by, entry.note)
        for entry in ranking.registered_random_banks
    }


def ranking_arms(ranking: Ranking) -> list[RankingArm]:
    k = ranking.k
    registered = registered_banks(ranking)
    arms = [RankingArm("top", k), RankingArm("bottom", k)]
    return arms + [
        RankingArm("random", k, seed, registered.get(seed)) for seed in ranking.random_seeds
    ]


def ranking_contrasts(ranking: Ranking) -> dict[str, ContrastPlan]:
    free = ranking.bare_test_run
    k = ranking.k
    top, bottom = RankingArm("top", k).run, RankingArm("bottom", k).run
    paper_seeds = ranking.random_seeds_in_paper
    contrasts = [
        ContrastPlan("rank-top-vs-free", free, top, True, "Top-K vs free", "ranking"),
        ContrastPlan("rank-bottom-vs-free", free, bottom, True, "Bottom-K vs free", "ranking"),
    ]
    for seed in ranking.random_seeds:
        suffix = "" if seed == paper_seeds[0] else f"-{seed}"
        table: Table = "ranking" if seed in paper_seeds else "extra"
        random = RankingArm("random", k, seed).run
        for name, control, treatment, description in (
            (f"rank-random{suffix}-vs-free", free, random, f"Random-K (seed {seed}) vs free"),
            (f"rank-top-vs-random{suffix}", random, top, f"Top-K vs Random-K (seed {seed})"),
            (
                f"rank-random{suffix}-vs-bottom",
                bottom,
                random,
                f"Random-K (seed {seed}) vs Bottom-K",
            ),
        ):
            contrasts.append(ContrastPlan(name, control, treatment, True, description, table))
    contrasts.append(
        ContrastPlan("rank-top-vs-bottom", bottom, top, True, "Top-K vs Bottom-K", "ranking")
    )
    return {contrast.name: contrast for contrast in contrasts}


class WorkflowPlan:
    """Everything the graph builds from one config, as typed objects."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.ranking = config.ranking
        self.gate = self.ranking.gate
        self.world_dir = config.world.dir
        # As written in the config: the backends are part of every run's identity, apart
        # from where its job runs (this host or a cluster's nodes), which changes no result.
        written = config.backends.settings()
        self.backends = {
            **{k: v for k, v in written.items() if k not in NOT_EVIDENCE_BACKENDS},
            **adapter_evidence(config.backends.environment),
        }
        declared = {name: self._declared(name, spec) for name, spec in config.runs.items()}
        self.arms: dict[str, RankingArm] = {arm.stem: arm for arm in ranking_arms(self.ranking)}
        bare_test = declared[self.ranking.bare_test_run]
        self.runs: dict[str, RunPlan] = {
            **declared,
            **{arm.run: self._arm_run(arm, bare_test) for arm in self.arms.values()},
        }
        experiment_b = self.ranking.experiment_b
        self.designs: dict[str, MaskDesign] = {
            "design": MaskDesign(
                "design", "masked", self.ranking.masked_runs, self.ranking.design_seed
            ),
            "design-b": MaskDesign(
                "design-b", "fresh", experiment_b.masked_runs, experiment_b.design_seed
            ),
        }
        self.masked: dict[str, RunPlan] = {
            masked: self._masked_run(design, masked)
            for design in self.designs.values()
            for masked in design.runs
        }
        self.contrasts: dict[str, ContrastPlan] = {
            **{n: ContrastPlan.declared(n, c) for n, c in config.contrasts.items()},
            **ranking_contrasts(self.ranking),
        }

    # runs --------------------------------------------------------------------

    def _bank(self, name: str) -> BankRef:
        bank = self.config.banks[name]
        return BankRef(name, bank.path, bank.chunks)

    def _declared(self, name: str, spec: Run) -> RunPlan:
        return RunPlan(
            name=name,
            experiment=spec.experiment,
            protocol=spec.protocol,
            checkpoint=spec.checkpoint,
            bank=self._bank(spec.bank) if spec.bank else None,
            split=spec.split or self.config.protocols[spec.protocol].tasks.split,
        )

    def _arm_run(self, arm: RankingArm, bare: RunPlan) -> RunPlan:
        bank_file = paths.fill(paths.FROZEN_BANK, gate=self.gate, arm=arm.stem)
        return RunPlan(
            name=arm.run,
            experiment=f"{bare.experiment.removesuffix('-free')}-{arm.run}",
            protocol=bare.protocol,
            checkpoint=bare.checkpoint,
            bank=BankRef(f"{self.gate}/{arm.rule}", bank_file, arm.k),
            split=bare.split,
            arm=arm,
        )

    def _masked_run(self, design: MaskDesign, masked: str) -> RunPlan:
        bare = self.runs[self.ranking.bare_val_run]
        return RunPlan(
            name=f"gate-{self.gate}-{masked}",
            experiment=f"{bare.experiment}-gate-{self.gate}-{masked}",
            protocol=bare.protocol,
            checkpoint=bare.checkpoint,
            bank=self._bank(self.ranking.bank),
            split=bare.split,
            mask=MaskRef(paths.fill(paths.GATE_DESIGN, gate=self.gate, design=design.name), masked),
        )

    # contrasts ---------------------------------------------------------------

    def contrasts_for(self, table: Table) -> list[str]:
        return [n for n, c in self.contrasts.items() if c.table == table]

    # what the paper shows ----------------------------------------------------

    @cached_property
    def main_runs(self) -> list[str]:
        runs: list[str] = []
        for name in self.contrasts_for("main"):
            contrast = self.contrasts[name]
            runs += [r for r in (contrast.control, contrast.treatment) if r not in runs]
        return runs

    @cached_property
    def paper_arms(self) -> list[RankingArm]:
        arms = {(arm.rule, arm.seed): arm for arm in self.arms.values()}
        randoms = [arms["random", s] for s in self.ranking.random_seeds_in_paper]
        return [arms["top", None], *randoms, arms["bottom", None]]

    def ranking_vs_free(self) -> list[str]:
        """Contrast names of the paper arms against free, in :attr:`paper_arms` order."""
        seeds = self.ranking.random_seeds_in_paper
        random = [f"rank-random{'' if s == seeds[0] else f'-{s}'}-vs-free" for s in seeds]
        return ["rank-top-vs-free", *random, "rank-bottom-vs-free"]

    def arm_contrasts(self) -> dict[str, str]:
        """Each paper arm's run -> its contrast against free."""
        arms = zip(self.paper_arms, self.ranking_vs_free(), strict=True)
        return {arm.run: contrast for arm, contrast in arms}

    # resolving a run ---------------------------------------------------------

    def run_inputs(self, plan: RunPlan) -> RunInputs:
        """Everything the run reads, resolved from config once."""
        protocol = self.config.protocols[plan.protocol]
        checkpoint = self.config.checkpoints[plan.checkpoint]
        return RunInputs(
            run=plan.name,
            experiment=plan.experiment,
            protocol_name=plan.protocol,
            protocol=protocol,
            checkpoint_id=checkpoint.checkpoint_id,
            checkpoint_path=checkpoint.path,
            checkpoint_expected_fingerprint=checkpoint.fingerprint,
            bank_name=plan.bank.name if plan.bank else None,
            bank_path=plan.bank.path if plan.bank else None,
            bank_chunks=plan.bank.chunks if plan.bank else None,
            split_file=protocol.tasks.split_file,
            split=plan.split,
            backends=self.backends,
            catalogue=paths.fill(paths.WORLD_CATALOGUE, world_dir=self.world_dir),
            system_prompt_file=protocol.prompt.system,
            skill_template_file=protocol.prompt.skill_template,
            mask_path=plan.mask.design if plan.mask else None,
            mask_run=plan.mask.run if plan.mask else None,
        )

    def checkpoint_id(self, run: str) -> str:
        return self.config.checkpoints[self.runs[run].checkpoint].checkpoint_id

    def checkpoint_by_id(self, checkpoint_id: str) -> Checkpoint:
        checkpoints = self.config.checkpoints.values()
        return next(c for c in checkpoints if c.checkpoint_id == checkpoint_id)


def weight_change_pair(config: Config) -> dict[str, dict[str, str]]:
    """The first and the last registered checkpoint, whose weights the audit compares."""
    names = list(config.checkpoints)
    return {
        role: {"name": name, "path": config.checkpoints[name].path}
        for role, name in (("base", names[0]), ("final", names[-1]))
    }


def front_rows(plan: WorkflowPlan) -> dict[str, Any]:
    """The report front page's linked rows (report.front.FrontRows): the main table's
    contrasts and runs by name, the ranking arms by label to their contrast against
    free, the pairwise contrasts by name; and the runs of each contrast linked."""
    arms = zip(plan.paper_arms, plan.ranking_vs_free(), strict=True)
    ranking = {arm.label: contrast for arm, contrast in arms}
    ranking |= {c: c for c in RANKING_PAIRWISE}
    main = {n: n for n in [*plan.contrasts_for("main"), *plan.main_runs]}
    linked = [*plan.contrasts_for("main"), *ranking.values()]
    return {
        "main": main,
        "ranking": ranking,
        "contrasts": {c: (plan.contrasts[c].treatment, plan.contrasts[c].control)
                      for c in linked},
        "runs": plan.main_runs,
    }  # fmt: skip
