"""The whole paper under profiles/gpu-host on a fake 14-card host: what every process sees.

The host is an nvidia-smi that lists 14 cards and a lock directory of the test's own; sglang's
place is taken by the project's test server (same flags). Every Python process the build
starts records its CUDA environment at start-up (a sitecustomize module on PYTHONPATH), so
the test sees each job and each model server as the operating system started it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from skilleval.config.loading import merge
from tests.conftest import REPO, copy_workflow, load_default_config, read_jsonl
from tests.test_owned_servers import write_nvidia_smi
from tests.test_slurm import stand_in_protocol

pytestmark = pytest.mark.slow

RECORDER = """
import json, os, sys
with open(os.environ["SKILLEVAL_TEST_PROCESSES"], "a") as handle:
    handle.write(json.dumps({
        "pid": os.getpid(),
        "argv": sys.argv,
        "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "CUDA_DEVICE_ORDER": os.environ.get("CUDA_DEVICE_ORDER"),
    }) + "\\n")
"""


# The PDF too where TeX is installed (CI installs it): its first page carries the notice.
TARGETS = ["paper", *(["paper/main.pdf"] if shutil.which("latexmk") else [])]


def small_matrix(workdir: Path) -> str:
    """The ablation matrix cut to two groups and one harness setting per step: the same
    rules, a tenth of the sim-trainer processes."""
    matrix = yaml.safe_load((REPO / "config" / "ablation" / "matrix.yaml").read_text())
    matrix["groups"] = {name: matrix["groups"][name] for name in ("default", "split")}
    harness = matrix["harness"]
    harness["benchmarks"] = dict(list(harness["benchmarks"].items())[:1])
    [kept] = harness["benchmarks"]
    for step in harness["steps"].values():
        if "settings" in step:
            step["settings"] = {kept: step["settings"][kept][:1]}
    (workdir / "config" / "ablation" / "small.yaml").write_text(yaml.safe_dump(matrix))
    return "config/ablation/small.yaml"


def host_workflow(workdir: Path) -> dict[str, Any]:
    small = yaml.safe_load((REPO / "tests" / "data" / "small.yaml").read_text())
    config = merge(load_default_config(), small)
    config["ablation"]["matrix"] = small_matrix(workdir)
    protocol = config["protocols"]["local-sglang"]
    stand_in_protocol(protocol, workdir / "results" / "world")
    protocol["model_server"]["dp_size"] = 4
    (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return config


def test_every_job_sees_its_leased_cards_or_none_and_never_gpu0(tmp_path: Path) -> None:
    (tmp_path / "workflow").mkdir()
    workdir = copy_workflow(tmp_path / "workflow")
    host_workflow(workdir)
    # One model server at a time: the stand-in also serves the run's environment on the
    # protocol's one port, which two live stand-ins cannot share (servers in parallel with
    # one environment server: benchmarks/bench_gpu_phase.py).
    profile = workdir / "profiles" / "gpu-host" / "config.yaml"
    serial = profile.read_text().replace("  model_server: 3\n", "  model_server: 1\n")
    assert serial != profile.read_text()
    profile.write_text(serial)
    (tmp_path / "bin").mkdir()
    write_nvidia_smi(tmp_path / "bin", 14)
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(RECORDER)
    processes = tmp_path / "processes.jsonl"
    lock_dir = Path("/tmp") / f"skilleval-test-locks-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "PATH": f"{tmp_path / 'bin'}:{Path(sys.executable).parent}:{os.environ['PATH']}",
        "PYTHONPATH": str(tmp_path / "site"),
        "SKILLEVAL_TEST_PROCESSES": str(processes),
        "SKILLEVAL_GPU_LOCK_DIR": str(lock_dir),
        "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7,8,9,10,11,12,13",  # what a bare shell has
    }
    try:
        done = subprocess.run(
            [sys.executable, "-m", "snakemake", "--profile", "profiles/gpu-host", "-j8", *TARGETS],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        subprocess.run(["rm", "-rf", str(lock_dir)], check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]

    started = read_jsonl(processes)
    servers = [p for p in started if "serve-world" in p["argv"]]
    jobs = [p for p in started if p not in servers and "--profile" not in p["argv"]]
    # Outputs only: each complete run also keeps a copy beside its journal.
    model_runs = [
        s for s in (workdir / "results").rglob("summary.json") if "journal" not in s.parts
    ]
    evaluations = [s for s in model_runs if "service" in json.loads(s.read_text())]
    assert len(servers) == len(evaluations) == 20, (len(servers), len(evaluations))
    rules = {Path(a).name.split(".")[1] for p in jobs for a in p["argv"] if "/scripts/tmp" in a}
    # Named by script: the sim trainer's per-benchmark jobs all run ablation_runs.py.
    assert {"eval_run", "audit_weight_diff", "paper_main_table", "ablation_runs"} <= rules, rules
    for process in jobs + servers:
        assert process["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID", process
    for job in jobs:
        assert job["CUDA_VISIBLE_DEVICES"] == "", job
    for server in servers:
        cards = server["CUDA_VISIBLE_DEVICES"].split(",")
        name = server["argv"][server["argv"].index("--served-model-name") + 1]
        assert len(cards) == 4 and "0" not in cards, server
        assert f"/gpu{'-'.join(cards)}/" in name, (name, cards)
    print(f"gpu-host paper: {len(jobs)} jobs with no card, {len(servers)} servers on 4 cards")
    assert_notice_follows_what_answered(workdir)


def assert_notice_follows_what_answered(workdir: Path) -> None:
    """The build's policy is openai, but what answered is skilleval serve-world: the title
    page, every table caption and every table format say the numbers are simulated."""
    notice = (workdir / "results" / "paper" / "notice.txt").read_text().strip()
    assert notice.startswith("Simulated evidence: every evaluation number comes from")
    assert "skilleval serve-world" in notice and "every ablation number" in notice
    assert "Simulated evidence" in (workdir / "paper" / "tables" / "notice.tex").read_text()
    tables = workdir / "paper" / "tables"
    # The ablation tables that show runs (the test's small matrix leaves some empty).
    ablation = [t.stem for t in tables.glob("ablation_*.csv") if t.read_text().count("\n") > 2]
    assert ablation
    for table in ("main", "ranking", "harness", *ablation):
        assert "Simulated numbers" in (tables / f"{table}.tex").read_text(), table
        assert (tables / f"{table}.csv").read_text().startswith("# Simulated evidence"), table
        assert (tables / f"{table}.md").read_text().startswith("> Simulated evidence"), table
        assert (tables / f"{table}.html").read_text().startswith('<p class="notice">'), table
    if "paper/main.pdf" in TARGETS:
        from pypdf import PdfReader

        first = " ".join(
            (PdfReader(workdir / "paper" / "main.pdf").pages[0].extract_text()).split()
        )
        assert "Simulated evidence: every evaluation number comes from" in first
