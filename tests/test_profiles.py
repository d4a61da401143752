"""Every profile is exercised with a dry run of the whole graph."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

from skilleval.config.loading import merged_config
from skilleval.protocol.sections import ModelServer
from skilleval.serving.gpu import cards_for
from skilleval.serving.sizing import run_job_size
from tests.conftest import REPO, load_default_config, planned, snakemake


def dry(workflow_copy: Path, profile: str, *args: str) -> str:
    done = snakemake(
        workflow_copy,
        "--profile",
        f"profiles/{profile}",
        "-n",
        "-f",
        "results/runs/base-free/summary.json",
        *args,
        check=False,
    )
    return done.stdout + done.stderr + f"\nexit {done.returncode}"


def test_default_profile(workflow_copy: Path) -> None:
    out = dry(workflow_copy, "default")
    assert "exit 0" in out and "gpu=4" not in out  # the sim policy needs no GPU


def test_gpu_host_profile_leases_from_cards_1_to_13(workflow_copy: Path) -> None:
    out = dry(workflow_copy, "gpu-host")
    assert "exit 0" in out
    assert "gpu=4" in out and "gpu_devices=1-13" in out and "model_server=1" in out


def test_gpu_host_refuses_a_run_needing_more_cards_than_the_host(workflow_copy: Path) -> None:
    big = workflow_copy / "config" / "dp16.yaml"
    big.write_text("protocols:\n  local-sglang:\n    model_server:\n      dp_size: 16\n")
    out = dry(workflow_copy, "gpu-host", "--configfile", "config/dp16.yaml")
    assert "exit 1" in out
    assert "asks for gpu=16 (tp x dp_size) but the profile allows gpu=13" in out
    assert "cards 1-13" in out and "Traceback" not in out


@pytest.mark.skipif(
    importlib.util.find_spec("snakemake_executor_plugin_slurm") is None,
    reason="pip install -e '.[slurm]'",
)
def test_slurm_profile_requests_gpus_not_gres(workflow_copy: Path) -> None:
    out = dry(workflow_copy, "slurm", "--configfile", "config/examples/cluster-environment.yaml")
    assert "exit 0" in out and "gpu=4" in out
    profile = yaml.safe_load((workflow_copy / "profiles" / "slurm" / "config.yaml").read_text())
    assert "gres" not in str(profile.get("default-resources", {}).get("slurm_extra", ""))


@pytest.mark.skipif(
    importlib.util.find_spec("snakemake_executor_plugin_slurm") is None,
    reason="pip install -e '.[slurm]'",
)
def test_slurm_jobs_are_sized_from_the_protocol_and_a_site_overrides_them(
    workflow_copy: Path,
) -> None:
    site = ("--configfile", "config/examples/cluster-environment.yaml")
    protocol = load_default_config()["protocols"]["local-sglang"]
    server = ModelServer.model_validate(
        {**protocol["model_server"], **protocol["execution"]["model_server"]}
    )
    launched = run_job_size("process", server, [], workflow_copy / "none.json")
    slurm = ("--profile", "profiles/slurm", "-f", "results/runs/base-free/summary.json")
    (run,) = [j for j in planned(workflow_copy, *slurm, *site) if j.rule == "eval_run"]
    assert run.resources["cpus_per_task"] == str(launched.cpus_per_task)
    # the world's checkpoint is not built yet: its weights count 0 MB
    assert run.resources["mem_mb"] == str(launched.mem_mb)
    assert run.resources["runtime"] == str(launched.runtime)
    overridden = ("--set-resources", "eval_run:mem_mb=99999", *site)
    (run,) = [j for j in planned(workflow_copy, *slurm, *overridden) if j.rule == "eval_run"]
    assert run.resources["mem_mb"] == "99999"


def test_the_runs_that_choose_banks_go_first(workflow_copy: Path) -> None:
    """The bare val run, the masked runs, the betas and the frozen banks carry a priority,
    so the ranking arms do not start last on an otherwise idle host (bench_gpu_phase.py)."""
    jobs = [
        (job.rule, ", ".join(f"{k}={v}" for k, v in job.wildcards.items()), job.priority)
        for job in planned(workflow_copy, "--profile", "profiles/gpu-host", "paper")
    ]
    first = {(rule, wildcards) for rule, wildcards, priority in jobs if priority == "1"}
    masked = {(r, w) for r, w, _ in jobs if r == "gate_masked_run"}
    assert len(masked) == 12 and masked <= first
    assert {r for r, _ in first} == {
        "eval_run", "gate_masked_run", "gate_design", "gate_beta", "freeze_bank"
    }  # fmt: skip
    assert {w for r, w in first if r == "eval_run"} == {"run=base-val-free"}
    assert len({(r, w) for r, w in first if r == "freeze_bank"}) == 3


def test_slurm_profile_refuses_a_loopback_environment(workflow_copy: Path) -> None:
    """config.yaml's environment is 127.0.0.1:5700: on a cluster node, the node's own."""
    out = dry(workflow_copy, "slurm")
    assert "exit 1" in out and "Traceback" not in out
    assert "protocols.local-sglang.execution.environment.url = 'http://127.0.0.1:5700'" in out
    assert "jobs run on cluster nodes" in out and "routable address" in out
    assert "exit 0" in dry(workflow_copy, "gpu-host")  # one host: its loopback is right


def test_no_profile_serialises_model_runs_beyond_the_cards() -> None:
    """Each run owns its server (leased cards and port, identity-checked), so the host runs
    as many servers as its cards hold and a cluster as many as its scheduler grants."""
    host = yaml.safe_load((REPO / "profiles" / "gpu-host" / "config.yaml").read_text())
    # What one server of the shipped protocol leases (tp x dp_size), as a run's job does.
    server = load_default_config()["protocols"]["local-sglang"]["model_server"]
    cards_per_server = cards_for("process", server["tp"], server["dp_size"])
    assert host["resources"]["model_server"] == host["resources"]["gpu"] // cards_per_server == 3
    slurm = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    assert "model_server" not in slurm["resources"]


def test_the_llama_cpp_example_plans_every_run_under_its_own_protocol(
    workflow_copy: Path,
) -> None:
    """config/examples/llama-cpp-server.yaml, the recipe of docs/real-server.md: a protocol
    of its own beside the frozen one, taken by every run, the shop in process."""
    overlay = ("--configfile", "config/examples/llama-cpp-server.yaml")
    out = dry(workflow_copy, "default", *overlay)
    assert "exit 0" in out, out
    assert "eval_run" in out and "results/runs/base-free/summary.json" in out
    files = [workflow_copy / "config/config.yaml", workflow_copy / overlay[1]]
    config = merged_config(files)
    assert {run["protocol"] for run in config["runs"].values()} == {"llama-cpp"}
    assert config["protocols"]["llama-cpp"]["model_server"]["identity"] == "trust"
