"""The whole paper under profiles/gpu-host (as shipped: three model servers at once) on a
fake 14-card host: what every process sees, and when each server held its cards.

The host is an nvidia-smi that lists 14 cards and a lock directory of the test's own; sglang's
place is taken by the project's test server (same flags), serving the model only; the runs
share one environment server that the test starts. Every Python process the build
starts records its CUDA environment at start-up (a sitecustomize module on PYTHONPATH), so
the test sees each job and each model server as the operating system started it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import urllib3
import yaml

from skilleval.config.loading import merge
from tests.conftest import REPO, copy_workflow, load_default_config, read_jsonl, stand_in_server
from tests.engine_slurm import free_port
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


STAMP = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})"
LEASED = re.compile(STAMP + r" INFO run (\S+): GPUs (\S+) and port (\d+) leased")
RELEASED = re.compile(STAMP + r" INFO run (\S+): model server stopped")


def at(stamp: str) -> float:
    return dt.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def intervals(workdir: Path) -> list[tuple[str, float, float, list[int], int]]:
    """(run, leased at, released at, cards, port) of every model run, from its log."""
    found = []
    for log in sorted((workdir / "results" / "logs").rglob("*.log")):
        text = log.read_text()
        leases, releases = LEASED.findall(text), RELEASED.findall(text)
        if leases and releases:
            stamp, run, cards, port = leases[-1]
            found.append((run, at(stamp), at(releases[-1][0]), [int(c) for c in cards.split(",")],
                          int(port)))  # fmt: skip
    return found


def overlaps(runs: list[tuple[str, float, float, list[int], int]]) -> list[str]:
    """Pairs of runs whose servers were live at once on a shared card or port."""
    clashes = []
    for i, (a, a0, a1, a_cards, a_port) in enumerate(runs):
        for b, b0, b1, b_cards, b_port in runs[i + 1 :]:
            if a0 < b1 and b0 < a1 and (set(a_cards) & set(b_cards) or a_port == b_port):
                clashes.append(f"{a} and {b}")
    return clashes


def wait_answering(url: str, server: subprocess.Popen[bytes], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert server.poll() is None, f"the environment server exited ({server.returncode})"
        with contextlib.suppress(urllib3.exceptions.HTTPError):
            if urllib3.request("GET", url, timeout=2, retries=False).status == 200:
                return
        time.sleep(0.2)
    raise AssertionError(f"{url} did not answer in {timeout_s} s")


def test_every_job_sees_its_leased_cards_or_none_and_never_gpu0(tmp_path: Path) -> None:
    (tmp_path / "workflow").mkdir()
    workdir = copy_workflow(tmp_path / "workflow")
    config = host_workflow(workdir)
    # The profile as shipped: three model servers at once. They share one environment
    # server, as runs share a lab's shop simulator; each stand-in serves the model only (its
    # own environment on a free port nobody calls), so no two stand-ins want one port.
    world, env_port = workdir / "results" / "world", free_port()
    protocol = config["protocols"]["local-sglang"]
    execution = protocol["execution"]
    execution["environment"].update(url=f"http://127.0.0.1:{env_port}", beside_run=False)
    execution["model_server"]["launch"]["command"] = stand_in_server(world, 0)
    (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    (tmp_path / "bin").mkdir()
    write_nvidia_smi(tmp_path / "bin", 14)
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(RECORDER)
    processes = tmp_path / "processes.jsonl"
    lock_dir = Path("/tmp") / f"skilleval-test-locks-{uuid.uuid4().hex[:8]}"
    unrecorded = {
        **os.environ,
        "PATH": f"{tmp_path / 'bin'}:{Path(sys.executable).parent}:{os.environ['PATH']}",
        "SKILLEVAL_GPU_LOCK_DIR": str(lock_dir),
        "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7,8,9,10,11,12,13",  # what a bare shell has
    }
    env = {
        **unrecorded,
        "PYTHONPATH": str(tmp_path / "site"),
        "SKILLEVAL_TEST_PROCESSES": str(processes),
    }
    snakemake = [sys.executable, "-m", "snakemake", "--profile", "profiles/gpu-host", "-j8"]

    def build(*targets: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*snakemake, *targets], cwd=workdir, env=env, capture_output=True, text=True,
            timeout=900,
        )  # fmt: skip

    environment: subprocess.Popen[bytes] | None = None
    try:
        # The world first: the environment server serves its tasks.
        done = build("results/world/ground_truth.json")
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
        environment = subprocess.Popen(
            [*stand_in_server(world, env_port), "--port", str(free_port()),
             "--model-path", str(world / "checkpoints" / "base" / "model.safetensors")],
            env=unrecorded, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_answering(f"http://127.0.0.1:{env_port}/info", environment)
        done = build(*TARGETS)
    finally:
        if environment is not None:
            environment.terminate()
            try:
                environment.wait(30)
            except subprocess.TimeoutExpired:  # never left behind for the next test's port
                environment.kill()
                environment.wait()
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
    # From the run logs: each server's life, from its lease to its stop.
    runs = intervals(workdir)
    assert len(runs) == 20 and not any(0 in cards for _, _, _, cards, _ in runs), runs
    assert overlaps(runs) == [], overlaps(runs)
    live = max(sum(b0 <= a0 < b1 for _, b0, b1, _, _ in runs) for _, a0, _, _, _ in runs)
    assert live >= 2, "the profile's three servers at once never ran two"
    print(
        f"gpu-host paper: {len(jobs)} jobs with no card, {len(servers)} servers on 4 cards, "
        f"at most {live} live at once"
    )
    assert_notice_follows_what_answered(workdir)


def rows_of(table_csv: Path) -> int:
    """The data rows of a table's CSV copy, below its comment lines and header."""
    lines = [line for line in table_csv.read_text().splitlines() if not line.startswith("# ")]
    return len(lines) - 1


def assert_notice_follows_what_answered(workdir: Path) -> None:
    """The build's policy is openai, but what answered is skilleval serve-world: the title
    page, every table caption and every table format say the numbers are simulated."""
    notice = (workdir / "results" / "paper" / "notice.txt").read_text().strip()
    assert notice.startswith("Simulated evidence: every evaluation number comes from")
    assert "skilleval serve-world" in notice and "every ablation number" in notice
    assert "Simulated evidence" in (workdir / "paper" / "tables" / "notice.tex").read_text()
    tables = workdir / "paper" / "tables"
    # The ablation tables that show runs (the test's small matrix leaves some empty).
    ablation = [t.stem for t in tables.glob("ablation_*.csv") if rows_of(t) > 0]
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
