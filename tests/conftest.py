from __future__ import annotations

import compileall
import copy
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from filelock import FileLock

from skilleval.config.matrix import Matrix
from skilleval.config.model import Config
from skilleval.protocol.sections import Protocol, Sampling
from skilleval.runs.inputs import RunInputs
from skilleval.skills.bank import Prompt
from skilleval.workflow.plan import WorkflowPlan
from skilleval.workflow.planned import PlannedJob, planned_jobs
from skilleval.world.design import world_design
from skilleval.world.generate import write_bank, write_checkpoint, write_tasks
from skilleval.world.server import start_servers
from tests.engine_docker import DockerEngine
from tests.engine_docker import missing_engine as docker_missing
from tests.engine_slurm_nodes import NodesCluster
from tests.engine_slurm_nodes import missing_engine as nodes_missing

REPO = Path(__file__).resolve().parent.parent
WORKFLOW_PARTS = ("Snakefile", "rules", "scripts", "config", "envs", "profiles", "report", "paper")


def pytest_sessionstart(session: pytest.Session) -> None:
    """The package compiled once, before any worker starts, as pip compiles an installed
    one: where PYTHONDONTWRITEBYTECODE is set, each of the suite's processes (a build's
    jobs, the command line) would compile it from source again. Workflow copies take
    the compiled files with the sources (small_paper_sources)."""
    if not hasattr(session.config, "workerinput"):
        compileall.compile_dir(REPO / "skilleval", quiet=1)


def load_default_config() -> dict[str, Any]:
    """The shipped config, with its prompt files' paths made absolute (tests run anywhere)."""
    config: dict[str, Any] = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    for protocol in config["protocols"].values():
        protocol["prompt"] = {k: str(REPO / v) for k, v in protocol["prompt"].items()}
    return config


# The shipped protocols' system message (config/prompts).
DEFAULT_PROMPT = Prompt.load(
    str(REPO / "config/prompts/shop-assistant.system.txt"), str(REPO / "config/prompts/skills.j2")
)


@pytest.fixture(scope="session")
def small_world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """World files of the default seeds with 48 tasks per split, written once per session."""
    return write_world(tmp_path_factory.mktemp("world"), tasks=48)


def write_world(root: Path, tasks: int) -> Path:
    """The default world's files in ``root``, with ``tasks`` tasks in val and in test."""
    world = load_default_config()["world"]
    write_tasks(
        world["seed"],
        world["categories"],
        world["products_per_category"],
        {"val": tasks, "test": tasks},
        root / "catalogue.json",
        root / "persona_splits.v1.json",
    )
    design = world_design(load_default_config())
    for name, checkpoint in design.checkpoints.items():
        weights = root / "checkpoints" / name / "model.safetensors"
        write_checkpoint(world["seed"], name, weights, checkpoint)
    for name, bank in design.banks.items():
        write_bank(world["seed"], name, root / "banks" / f"{name}.md", bank)
    return root


@contextmanager
def environment_server(world: Path) -> Iterator[str]:
    """The URL of the world's environment server (skilleval serve-world's, in threads)."""
    weights = world / "checkpoints" / "base" / "model.safetensors"
    servers = start_servers(str(weights), str(world), seed=20260830, server_args=AS_LAUNCHED)
    try:
        yield servers.env_url
    finally:
        servers.shutdown()


@pytest.fixture()
def no_card_leased(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of the test that leases a card or starts a model server fails it."""
    from skilleval.runs import evaluation

    def no_server(*args: object, **kwargs: object) -> Any:
        raise AssertionError("a card was leased and a server started")

    monkeypatch.setattr(evaluation, "served", no_server)


def plan_of(config: dict[str, Any]) -> WorkflowPlan:
    """The workflow's plan of a config mapping that is valid (a shipped one, edited)."""
    return WorkflowPlan(Config.model_validate(config))


def with_trainer(matrix: Matrix, **trainer: Any) -> Matrix:
    """The matrix with some of its trainer keys changed, validated as a loaded one is."""
    data = matrix.settings()
    data["trainer"] = {**data["trainer"], **trainer}
    return Matrix.model_validate(data)


def run_inputs(world: Path, run: str = "base-S0", **changes: Any) -> RunInputs:
    config = load_default_config()
    config["world"]["dir"] = str(world)
    config["protocols"]["local-sglang"]["tasks"]["split_file"] = str(
        world / "persona_splits.v1.json"
    )
    for ck in config["checkpoints"].values():
        ck["path"] = str(world / "checkpoints" / Path(ck["path"]).parent.name / "model.safetensors")
    for name, bank in config["banks"].items():
        bank["path"] = str(world / "banks" / f"{name}.md")
    inputs = (plan := plan_of(config)).run_inputs(plan.runs[run])
    return with_protocol(inputs, changes.pop("protocol", inputs.protocol), **changes)


def shipped_sampling() -> Sampling:
    """The shipped protocol's sampling, as a run's policy is given it."""
    return Sampling.model_validate(load_default_config()["protocols"]["local-sglang"]["sampling"])


def protocol_values(inputs: RunInputs) -> dict[str, Any]:
    """The run's protocol as the mapping it was written as, for a test to edit."""
    return copy.deepcopy(inputs.protocol.settings())


def with_protocol(
    inputs: RunInputs, protocol: Protocol | Mapping[str, Any], **changes: Any
) -> RunInputs:
    """The inputs with another protocol (typed, as a job is given it) and other changes."""
    typed = protocol if isinstance(protocol, Protocol) else Protocol.model_validate(protocol)
    return replace(inputs, protocol=typed, **changes)


# The test server's sglang arguments as the launcher starts sglang (sglang's own default,
# and the stand-in's, is --sampling-defaults model, which the identity check refuses).
AS_LAUNCHED: dict[str, Any] = {"sampling_defaults": "openai"}


def stand_in_server(world: Path, env_port: int, *options: str) -> list[str]:
    """The command that takes sglang's place: the project's test server for ``world`` (model
    and environment), taking sglang's flags, which the launcher appends."""
    command = [sys.executable, "-m", "skilleval.cli", "serve-world", "--world-dir", str(world)]
    return [*command, "--env-port", str(env_port), *options]


def copy_workflow(tmp_path: Path) -> Path:
    """A copy of the workflow's sources (no built results) in ``tmp_path``."""
    for part in WORKFLOW_PARTS:
        source = REPO / part
        if source.is_dir():
            shutil.copytree(
                source,
                tmp_path / part,
                ignore=shutil.ignore_patterns("tables", "figures", "*.pdf", "__pycache__"),
            )
        else:
            shutil.copy(source, tmp_path / part)
    return tmp_path


def unfreeze(workdir: Path) -> None:
    """The shipped protocol unfrozen in a workflow copy, for a test that changes its values
    (a stand-in's data parallelism, another temperature) to see what the graph does with
    them; tests/test_frozen_protocols.py tests the freeze itself."""
    (workdir / "config" / "frozen-protocols.yaml").write_text("{}\n")


@contextmanager
def unfrozen(workdir: Path) -> Iterator[None]:
    """unfreeze for the time of a ``with`` block."""
    registry = workdir / "config" / "frozen-protocols.yaml"
    kept = registry.read_bytes()
    unfreeze(workdir)
    try:
        yield
    finally:
        registry.write_bytes(kept)


@pytest.fixture()
def workflow_copy(tmp_path: Path) -> Path:
    """A copy of the workflow in a temporary directory, so tests never touch results/."""
    return copy_workflow(tmp_path)


# Failures the sim trainer plants in the small paper's matrix, with the audit check each fails.
PLANTED = {
    "LR-docvqa-8": "undeclared_override",
    "MBS-alfworld-2": "rate_limit",
    "SLOWN-livemathematicianbench-5": "oom",
}


SMALL_PAPER = ("paper", "-j", "2", "--configfile", "config/small.yaml")
STEPS = re.compile(r"^(\d+) of (\d+) steps", re.MULTILINE)


def built_once(
    tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], str]
) -> tuple[Path, str]:
    """``build(workdir)`` run once per session, and what it printed: the first xdist worker
    to ask runs it in the directory the workers share (the parent of each worker's base
    temp, as pytest-xdist's docs do it for session data) under a file lock, and the others
    wait for it. Tests only read the result; one that edits or builds takes a copy."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    workdir = shared / name
    printed, lock = workdir.with_suffix(".out"), workdir.with_suffix(".lock")
    workdir.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(lock):
        if not printed.exists():
            shutil.rmtree(workdir, ignore_errors=True)
            printed.write_text(build(workdir))
    return workdir, printed.read_text()


@pytest.fixture(scope="session")
def small_paper_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The paper built once on the small world (tests/data/small.yaml), and what the build
    printed: a copy of the workflow and of the package (a code edit stays in the copy), and
    the seed matrix with three planted failures, kept as the seed file's own text so that
    edits to its lines apply. One build serves the whole session (built_once)."""

    def build(workdir: Path) -> str:
        small_paper_sources(workdir)
        done = snakemake(workdir, *SMALL_PAPER)
        return done.stdout + done.stderr

    return built_once(tmp_path_factory, "small-paper", build)


@contextmanager
def interruptible() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt in this process, and children started inside take it
    as a terminal's programs do, even when the suite runs with SIGINT ignored: bash ignores
    it for a background job (``pytest &``), and Python keeps an ignored SIGINT ignored, in
    itself and in every child. A caught signal is reset to its default across exec, where
    Python installs its own handler again."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="session")
def resumed_paper_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The small paper built a second time, in another directory one level deeper than the
    first (so that neither a path nor its depth can show in what is built), interrupted at
    about a third of its steps (SIGINT to the process group, as a terminal's Ctrl-C sends it) and
    resumed by the same command again (the README's recovery), and what the interrupted
    build printed on stderr. Built once per session (built_once): the interrupt test reads
    its stderr, and the identity test compares it with small_paper_build."""

    def build(workdir: Path) -> str:
        small_paper_sources(workdir)
        log = workdir.with_suffix(".err")
        with log.open("w") as stderr:
            command = [sys.executable, "-m", "snakemake", "--directory", str(workdir)]
            with interruptible():
                interrupted = subprocess.Popen(
                    [*command, *SMALL_PAPER], cwd=workdir, stdout=subprocess.DEVNULL,
                    stderr=stderr, start_new_session=True,
                )  # fmt: skip
            deadline = time.monotonic() + 400
            while time.monotonic() < deadline and interrupted.poll() is None:
                done = STEPS.findall(log.read_text())
                if done and int(done[-1][0]) >= int(done[-1][1]) // 3:
                    break
                time.sleep(0.2)
            assert interrupted.poll() is None, "the build ended before it could be interrupted"
            os.killpg(interrupted.pid, signal.SIGINT)
            assert interrupted.wait(timeout=300) != 0
        snakemake(workdir, *SMALL_PAPER)
        return log.read_text()

    return built_once(tmp_path_factory, "elsewhere/resumed-paper", build)


@pytest.fixture(scope="module")
def small_paper(
    small_paper_build: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A copy of the built small paper (small_paper_build) for one test module, which may
    edit and restore its files or build in it. The copy keeps every file's mtime and
    Snakemake's records (.snakemake), so it is as up to date as the build itself."""
    copy = tmp_path_factory.mktemp("paper") / "graph"
    shutil.copytree(small_paper_build[0], copy, symlinks=True)
    return copy


@pytest.fixture(scope="module")
def built(small_paper: Path) -> Path:
    """The module's copy of the built small paper (small_paper), for tests that read it."""
    return small_paper


def small_paper_sources(workdir: Path) -> Path:
    """The small paper's sources, unbuilt, in ``workdir`` (see small_paper)."""
    workdir.mkdir(parents=True, exist_ok=True)
    copy_workflow(workdir)
    shutil.copytree(REPO / "skilleval", workdir / "skilleval")
    shutil.copy(REPO / "tests" / "data" / "small.yaml", workdir / "config" / "small.yaml")
    seed = (workdir / "config" / "ablation" / "matrix.yaml").read_text()
    planted = seed.replace("  plant: {}", f"  plant: {json.dumps(PLANTED)}", 1)
    assert planted != seed, "the seed matrix no longer has an empty trainer.plant line"
    (workdir / "config" / "ablation" / "planted.yaml").write_text(planted)
    return workdir


def snakemake(workdir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``python -m snakemake --directory WORKDIR ARGS`` run in ``workdir``, output captured."""
    command = [sys.executable, "-m", "snakemake", "--directory", str(workdir), *args]
    done = subprocess.run(command, cwd=workdir, capture_output=True, text=True, timeout=600)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(command[2:])} failed:\n{done.stdout}\n{done.stderr}")
    return done


def skilleval_cli(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m skilleval.cli ARGS`` run in ``workdir``, output captured: ``-m`` puts
    ``workdir`` first on the path, so a workflow copy runs its own copy of the package."""
    command = [sys.executable, "-m", "skilleval.cli", *args]
    return subprocess.run(command, cwd=workdir, capture_output=True, text=True, timeout=600)


def planned(workdir: Path, *args: str) -> list[PlannedJob]:
    """The jobs of ``snakemake -n ARGS`` in ``workdir``, read as ``skilleval stale`` reads
    them: from the plan file of the logger plugin (skilleval.workflow.planned)."""
    return planned_jobs(workdir, [], [], options=args)


def dry_run_outputs(workdir: Path, *args: str) -> dict[str, set[str]]:
    """Rule name -> outputs of the jobs a dry run would execute."""
    return outputs_by_rule(planned(workdir, *args))


def outputs_by_rule(planned: list[PlannedJob]) -> dict[str, set[str]]:
    jobs: dict[str, set[str]] = {}
    for job in planned:
        jobs.setdefault(job.rule, set()).update(job.outputs)
    return jobs


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodesCluster]:
    """One SLURM cluster of three nodes for the session (tests marked slurm), stopped by
    PID at the end, its namespaces removed."""
    reason = nodes_missing()
    if reason:
        pytest.skip(reason)
    cluster = NodesCluster(tmp_path_factory.mktemp("slurm")).start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def docker_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DockerEngine]:
    """One Docker engine and test-server image for the session (tests marked docker)."""
    reason = docker_missing()
    if reason:
        pytest.skip(reason)
    engine = DockerEngine(tmp_path_factory.mktemp("docker")).start()
    yield engine
    engine.stop()


@pytest.hookimpl(wrapper=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> Generator[None, int, int]:
    """``-n logical``: the cores pytest-xdist counts, and one worker more. Many tests wait
    on real seconds (outages, servers starting, the session's shared build under its
    lock); the extra worker keeps the cores busy meanwhile. A count the user gives in
    PYTEST_XDIST_AUTO_NUM_WORKERS is taken as given."""
    counted = yield
    return counted if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS") else counted + 1


# The longest test files, slowest first (pytest --durations, 2 cores): handed out first, so
# that no worker starts one of them when the others are nearly done (pytest-xdist hands out
# work in collection order with --no-loadscope-reorder). test_outages mostly waits (its
# outages are real seconds), so it runs beside files that compute.
LONGEST_FIRST = (
    "test_staleness_builds.py",
    "test_readme.py",
    "test_staleness.py",
    "test_benchmarks.py",
    "test_outages.py",
    "test_gpu_host.py",
    "test_workflow_e2e.py",
    "test_lab_adapter.py",
    "test_lowest_versions.py",
    "test_renamed_world.py",
    "test_slurm.py",
    "test_bad_inputs.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The tests that start a SLURM cluster or a Docker engine are of the full suite only:
    # the fast tier (pytest -m "not slow") is the rest.
    for item in items:
        if item.get_closest_marker("slurm") or item.get_closest_marker("docker"):
            item.add_marker(pytest.mark.slow)

    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: each file keeps its own order
