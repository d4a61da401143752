"""The graph on a real SLURM cluster of three nodes (tests/engine_slurm_nodes.py): a slice
of the paper (world, two runs that each ask for two GPUs, one contrast, the main table)
through a site copy of profiles/slurm."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from skilleval.config.loading import merge
from tests.conftest import (
    REPO,
    copy_workflow,
    load_default_config,
    read_jsonl,
    small_paper_sources,
    stand_in_server,
    unfreeze,
)
from tests.engine_slurm import ACCOUNT, PARTITION, SlurmCluster, free_port
from tests.engine_slurm_nodes import NODES, NodesCluster
from tests.test_benchmarks import ON_THE_CLUSTER, run_tiny
from tests.test_owned_servers import write_nvidia_smi
from tests.test_staleness_builds import compare_builds

pytestmark = pytest.mark.slurm
GPU_RUNS = ("base-free", "base-S0")
CARDS_PER_RUN = 2


def stand_in_protocol(protocol: dict[str, Any], world: Path) -> None:
    """sglang's place taken by the project's test server (same flags), on loopback ports."""
    model_port, env_port = free_port(), free_port()
    execution = protocol["execution"]
    execution["environment"]["url"] = f"http://127.0.0.1:{env_port}"
    execution["environment"]["beside_run"] = True  # the test server serves both
    protocol["model_server"].update(tp=1, dp_size=CARDS_PER_RUN)
    server = execution["model_server"]
    server["base_url"] = f"http://127.0.0.1:{model_port}/v1"
    server["launch"] = {
        "command": stand_in_server(world, env_port),
        "image": "skilleval/unused:none",
        "startup_timeout_s": 120,
    }


def slice_workflow(workdir: Path, *server_options: str) -> None:
    """The small world, only the runs and contrast of the slice, served through process."""
    small = yaml.safe_load((REPO / "tests" / "data" / "small.yaml").read_text())
    config = merge(load_default_config(), small)
    config["ablation"] = load_default_config()["ablation"]  # not the planted matrix
    config["runs"] = {name: config["runs"][name] for name in (*GPU_RUNS, "base-val-free")}
    config["contrasts"] = {"s0-gain": config["contrasts"]["s0-gain"]}
    config["backends"] = {
        "policy": "openai",
        "environment": "http",
        "model_server": "process",
        "jobs_run_on": "cluster_nodes",
    }
    stand_in_protocol(config["protocols"]["local-sglang"], workdir / "results" / "world")
    launch = config["protocols"]["local-sglang"]["execution"]["model_server"]["launch"]
    launch["command"] += list(server_options)
    (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    unfreeze(workdir)
    # A model run's job asks for what a real sglang server needs (serving/sizing.py); the
    # test cluster is smaller, so the site overrides it as the README says. Each stand-in
    # also serves the environment on the protocol's one port, so two cannot share a node:
    # a run takes all of a node's CPUs.
    site_profile(workdir, config["backends"], run_cpus=os.cpu_count() or 1)


def cluster_jobs(cluster: SlurmCluster, expected: int) -> list[dict[str, str]]:
    """Jobs sacct recorded, waiting briefly for slurmdbd to catch up."""
    fields = (
        "JobID", "Comment", "AllocTRES", "State", "Account", "Partition", "Submit", "End",
        "NodeList",
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while True:
        out = cluster.run("sacct", "-X", "-P", "-n", "-o", ",".join(fields)).stdout
        jobs = [dict(zip(fields, line.split("|"), strict=True)) for line in out.splitlines()]
        if len(jobs) >= expected or time.monotonic() > deadline:
            return jobs
        time.sleep(1)


def test_a_paper_slice_builds_on_the_cluster_with_the_cards_it_asked_for(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    workdir = copy_workflow(tmp_path)
    slice_workflow(workdir)
    before = {j["JobID"] for j in cluster_jobs(slurm_cluster, 0)}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", "--profile", "profiles/site", "paper/tables/main.tex"],
        cwd=workdir,
        env=slurm_cluster.env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    wall = time.monotonic() - started
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-6000:]
    print(f"SLURM slice: {wall:.1f} s wall; cluster up in {slurm_cluster.started_s:.1f} s")

    jobs = [j for j in cluster_jobs(slurm_cluster, len(before) + 3) if j["JobID"] not in before]
    # To the cluster went the GPU runs and the audit that reads the checkpoint they serve;
    # the world, the contrast, its verdict and the table ran here as localrules.
    assert sorted(j["Comment"] for j in jobs) == sorted(
        [
            *(f"rule_eval_run_wildcards_{run}" for run in GPU_RUNS),
            "rule_audit_checkpoint_wildcards_qwen35-4b-base-hf",
        ]
    )
    for job in jobs:
        assert job["State"] == "COMPLETED", job
        assert (job["Account"], job["Partition"]) == (ACCOUNT, PARTITION)
        if not job["Comment"].startswith("rule_eval_run"):
            assert "gres/gpu" not in job["AllocTRES"], job
            continue
        assert f"gres/gpu={CARDS_PER_RUN}" in job["AllocTRES"], job
        run = job["Comment"].rsplit("_", 1)[1]
        log = (workdir / "results" / "logs" / "runs" / f"{run}.log").read_text()
        # The run used exactly the cards SLURM gave its job, and says so.
        given = re.search(rf"devices (\S+) assigned by SLURM job {job['JobID']} "
                          r"\(SLURM_JOB_GPUS=(\S+)\)", log)  # fmt: skip
        assert given and given[1] == given[2], log[-2000:]
        assert len(given[1].split(",")) == CARDS_PER_RUN
        assert (workdir / "results" / "runs" / run / "summary.json").exists()
    # No token holds model runs to one at a time: both were in the cluster's queue together
    # (each submitted before the other ended); the scheduler alone decides when each runs.
    first, second = sorted((j for j in jobs if j["Comment"].startswith("rule_eval_run")),
                           key=lambda j: j["Submit"])  # fmt: skip
    assert second["Submit"] < first["End"], (first, second)
    # Each run took all of a node's CPUs, so the two ran on two of the three nodes, each
    # with the servers its job started there, on that node's own loopback.
    assert first["NodeList"] != second["NodeList"], (first, second)
    assert {first["NodeList"], second["NodeList"]} <= set(NODES)
    assert (workdir / "results" / "verdicts" / "s0-gain.json").exists()
    assert "s0-gain" in (workdir / "paper" / "tables" / "main.tex").read_text()
    local = built_here(tmp_path / "here")
    for run in GPU_RUNS:
        assert evidence_of(workdir, run) == evidence_of(local, run), run
    there, here = (json.loads((w / "results/verdicts/s0-gain.json").read_text())
                   for w in (workdir, local))  # fmt: skip
    # A check's words name what answered, by the weights path the server reports, which
    # is each build directory's own; its name and outcome are the result.
    for verdict in (there, here):
        verdict["checks"] = [(c["name"], c["passed"]) for c in verdict["checks"]]
    assert without_provenance(there) == without_provenance(here)


# What differs between two builds of the same evidence: when, where and how each was built
# (provenance, the service's addresses, the execution record) and which server process
# answered (its name holds its port and pid); everything else is the result.
NOT_RESULTS = ("provenance", "service", "execution", "answered")


def without_provenance(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in NOT_RESULTS}


def evidence_of(workdir: Path, run: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    folder = workdir / "results" / "runs" / run
    summary = json.loads((folder / "summary.json").read_text())
    episodes = sorted(read_jsonl(folder / "results.jsonl"), key=lambda r: r["task_id"])
    return without_provenance(summary), [without_provenance(e) for e in episodes]


def built_here(tmp_path: Path) -> Path:
    """The same slice built on this host, no SLURM: the gpu-host profile over a fake
    nvidia-smi of its 14 cards and --resources gpu=3, so one two-card run at a time (each
    stand-in serves the environment on the protocol's one port)."""
    tmp_path.mkdir()
    workdir = copy_workflow(tmp_path)
    slice_workflow(workdir)
    (tmp_path / "bin").mkdir()
    write_nvidia_smi(tmp_path / "bin", 14)
    env = {
        **os.environ,
        "PATH": f"{tmp_path / 'bin'}:{Path(sys.executable).parent}:{os.environ['PATH']}",
        "SKILLEVAL_GPU_LOCK_DIR": str(tmp_path / "locks"),
        "CUDA_VISIBLE_DEVICES": ",".join(map(str, range(14))),  # what a bare shell has
    }
    profile = ("--profile", "profiles/gpu-host")
    command = [sys.executable, "-m", "snakemake", "paper/tables/main.tex", *profile, "-j2"]
    done = subprocess.run(
        [*command, "--resources", "gpu=3"], cwd=workdir, env=env, capture_output=True,
        text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return workdir


def squeued(cluster: SlurmCluster) -> dict[str, tuple[str, str]]:
    """Rule comment -> (state, node) of the jobs in the queue."""
    out = cluster.run("squeue", "-h", "-o", "%k|%T|%N", check=False).stdout
    return {k: (t, n) for k, t, n in (line.split("|") for line in out.splitlines())}


def test_a_node_lost_mid_run_costs_no_task_and_leaves_nothing_behind(
    slurm_cluster: NodesCluster, tmp_path: Path
) -> None:
    """A run's node dies halfway (its slurmd and every process in its namespace killed):
    SLURM marks the node down and the job NODE_FAIL; Snakemake submits it once more
    without that node (profiles/slurm: retries 1, no SLURM requeue); the run resumes from
    its journal on another node, with every task once, and the servers the dead job
    started leave no lease in the way."""
    workdir = copy_workflow(tmp_path)
    slice_workflow(workdir, "--latency", "0.2")
    target = "results/runs/base-free/summary.json"
    log = (tmp_path / "build.log").open("w")
    command = [sys.executable, "-m", "snakemake", "--profile", "profiles/site", target]
    build = subprocess.Popen(command, cwd=workdir, env=slurm_cluster.env, stdout=log, stderr=log)
    comment = "rule_eval_run_wildcards_base-free"
    journal = workdir / "results" / "journal" / "base-free"
    timeline: list[tuple[float, str]] = []
    lost = None
    try:
        deadline = time.monotonic() + 300
        while lost is None and time.monotonic() < deadline and build.poll() is None:
            state, node = squeued(slurm_cluster).get(comment, ("", ""))
            done = sum(len(read_jsonl(p)) for p in journal.glob("*.jsonl"))
            if state == "RUNNING" and done >= 8:
                timeline.append((time.monotonic(), f"{done} episodes journaled on {node}"))
                slurm_cluster.lose(node)
                lost = node
                timeline.append((time.monotonic(), f"{node} lost"))
            time.sleep(0.2)
        assert lost is not None, (tmp_path / "build.log").read_text()[-3000:]
        assert build.wait(timeout=600) == 0, (tmp_path / "build.log").read_text()[-5000:]
        timeline.append((time.monotonic(), "build finished"))
    finally:
        if build.poll() is None:
            build.kill()
        if lost is not None:
            slurm_cluster.revive(lost)
    results = read_jsonl(workdir / "results" / "runs" / "base-free" / "results.jsonl")
    tasks = [r["task_id"] for r in results]
    assert len(tasks) == len(set(tasks)) and tasks, "every task once"
    summary = json.loads((workdir / target).read_text())
    execution = summary["provenance"]["execution"]
    assert execution["reused_from_journal"] >= 8 and summary["coverage"] == 1.0, execution
    assert execution["reused_from_journal"] + execution["ran"] == len(tasks)
    fields = ("JobID", "Comment", "State", "NodeList", "Start", "End")
    out = slurm_cluster.run("sacct", "-D", "-X", "-P", "-n", "-o", ",".join(fields)).stdout
    attempts = [dict(zip(fields, line.split("|"), strict=True)) for line in out.splitlines()]
    attempts = [a for a in attempts if a["Comment"] == comment]
    assert attempts[-1]["State"] == "COMPLETED" and attempts[-1]["NodeList"] != lost, attempts
    assert any(a["NodeList"] == lost and a["State"] != "COMPLETED" for a in attempts), attempts
    began = timeline[0][0]
    print("lost-node timeline:", [(round(t - began, 1), what) for t, what in timeline])
    print("sacct attempts:", attempts)
    print("episodes: reused", execution["reused_from_journal"], "ran", execution["ran"])


def site_profile(workdir: Path, backends: dict[str, Any], run_cpus: int = 1) -> None:
    """A site copy of profiles/slurm for the test cluster: its partition and account, jobs
    sized to its nodes (a model run with ``run_cpus``), ``backends`` as the graph's."""
    site = workdir / "profiles" / "site"
    shutil.copytree(workdir / "profiles" / "slurm", site)
    profile = yaml.safe_load((site / "config.yaml").read_text())
    small = {"mem_mb": 500, "runtime": 10, "cpus_per_task": 1}
    profile["default-resources"].update(slurm_partition=PARTITION, slurm_account=ACCOUNT, **small)
    runs = {**small, "cpus_per_task": run_cpus}
    profile.setdefault("set-resources", {}).update(
        eval_run=runs, gate_masked_run=runs, ablation_run=small
    )
    profile["config"]["backends"] = backends
    # The plugin's first status check waits 40 s by default, sized for busy clusters.
    profile["slurm-init-seconds-before-status-checks"] = 2
    (site / "config.yaml").write_text(yaml.safe_dump(profile, sort_keys=False))


def test_the_small_paper_on_three_nodes_equals_the_paper_built_here(
    slurm_cluster: NodesCluster, small_paper_build: tuple[Path, str], tmp_path: Path
) -> None:
    """The whole small paper through profiles/slurm: its jobs spread over the nodes, and
    every file it builds equals the same paper built on this host (small_paper_build),
    apart from provenance: where a job ran is no evidence."""
    workdir = tmp_path / "cluster"
    small_paper_sources(workdir)
    small = yaml.safe_load((workdir / "config" / "small.yaml").read_text())
    written = {**load_default_config()["backends"], **small.get("backends", {})}
    site_profile(workdir, {**written, "jobs_run_on": "cluster_nodes"})
    before = {j["JobID"] for j in cluster_jobs(slurm_cluster, 0)}
    command = [sys.executable, "-m", "snakemake", "paper", "--profile", "profiles/site"]
    started = time.monotonic()
    done = subprocess.run(
        [*command, "--configfile", "config/small.yaml"], cwd=workdir, env=slurm_cluster.env,
        capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-6000:]
    jobs = [j for j in cluster_jobs(slurm_cluster, len(before) + 1) if j["JobID"] not in before]
    nodes = {j["NodeList"] for j in jobs}
    print(f"small paper on 3 nodes: {time.monotonic() - started:.0f} s, {len(jobs)} jobs on "
          f"{sorted(nodes)}")  # fmt: skip
    assert len(nodes & set(NODES)) >= 2 and all(j["State"] == "COMPLETED" for j in jobs)
    compared, differing = compare_builds(small_paper_build[0], workdir)
    assert compared > 1000 and differing == [], differing[:20]


@pytest.mark.parametrize("script", sorted(ON_THE_CLUSTER))
def test_a_cluster_benchmark_runs_tiny_on_the_session_s_cluster(
    script: str, slurm_cluster: NodesCluster, tmp_path: Path
) -> None:
    env = {**slurm_cluster.env, "SKILLEVAL_BENCH_CLUSTER": "running"}
    run_tiny(script, *ON_THE_CLUSTER[script], env, tmp_path)
