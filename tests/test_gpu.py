from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from skilleval.errors import GpuLeaseError
from skilleval.serving.gpu import check_requests, gpu_lease, job_lease, parse_devices
from tests.conftest import REPO


def test_parse_devices() -> None:
    assert parse_devices("1-3,7") == [1, 2, 3, 7]
    assert parse_devices([3, 1, 3]) == [1, 3]
    assert parse_devices("") == []


def test_leases_never_share_a_card_and_never_hand_out_gpu0(tmp_path: Path) -> None:
    with (
        gpu_lease(2, range(0, 4), tmp_path) as first,
        gpu_lease(1, range(0, 4), tmp_path) as second,
    ):
        assert 0 not in first.devices + second.devices
        assert set(first.devices).isdisjoint(second.devices)
        with (
            pytest.raises(GpuLeaseError, match="no 1 free GPU"),
            gpu_lease(1, range(0, 4), tmp_path, timeout_s=0.3),
        ):
            pass


def test_asking_for_more_cards_than_allowed_is_refused(tmp_path: Path) -> None:
    with (
        pytest.raises(GpuLeaseError, match="asks for 14 GPU\\(s\\) but the host allows 13"),
        gpu_lease(14, range(14), tmp_path),
    ):
        pass
    with pytest.raises(GpuLeaseError, match="rule serve asks for gpu=16"):
        check_requests({"rule serve": 16}, 13, "profile gpu-host")


def test_sigkill_releases_the_lease(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nfrom skilleval.serving.gpu import gpu_lease\n"
            f"with gpu_lease(1, [1], {str(tmp_path)!r}):\n"
            "    print('held', flush=True)\n"
            "    time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    with pytest.raises(GpuLeaseError), gpu_lease(1, [1], tmp_path, timeout_s=0.2):
        pass
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    with gpu_lease(1, [1], tmp_path, timeout_s=5) as lease:
        assert lease.devices == (1,)


@pytest.mark.slow
def test_forty_jobs_through_snakemake_never_overlap_or_touch_gpu0(tmp_path: Path) -> None:
    """40 one-card jobs, -j 40, --resources gpu=13, inventory 1-13 (14 cards, 0 protected)."""
    base = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "benchmarks/gpu_leases/Snakefile"),
        "-d",
        str(tmp_path),
        "--resources",
        "gpu=13",
        "--default-resources",
        "gpu_devices='1-13'",
    ]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    lock_dir = tmp_path / "locks"
    done = subprocess.run(
        [*base, "-j", "41", "--config", "jobs=40", "hold_s=0.4"],
        capture_output=True,
        text=True,
        env=env | {"TMPDIR": str(lock_dir)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    leases = [json.loads(p.read_text()) for p in (tmp_path / "probe").glob("*.lease")]
    assert len(leases) == 41
    intervals = sorted((r["started"], r["ended"], d) for r in leases for d in r["devices"])
    for i, (_start, end, device) in enumerate(intervals):
        assert device != 0
        clash = [x for x in intervals[i + 1 :] if x[2] == device and x[0] < end]
        assert not clash, f"card {device} held twice at once"
    seen = [
        json.loads((tmp_path / "probe" / p.name.removesuffix(".lease")).read_text())
        for p in (tmp_path / "probe").glob("*.lease")
    ]
    assert all(
        s["CUDA_VISIBLE_DEVICES"] and "0" not in s["CUDA_VISIBLE_DEVICES"].split(",") for s in seen
    )
    refused = subprocess.run(
        [*base, "-n", "--config", "too_many_gpus=14"], capture_output=True, text=True, env=env
    )
    assert refused.returncode != 0
    assert "asks for gpu=14 but the profile allows gpu=13" in refused.stdout + refused.stderr
    assert "Traceback" not in refused.stdout + refused.stderr


@pytest.fixture()
def cuda_torch() -> Any:
    """torch with a CUDA GPU, or the test skips (CI has none)."""
    if shutil.which("nvidia-smi") is None:
        pytest.skip("needs an NVIDIA GPU")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("CUDA not available")
    return torch


@pytest.mark.gpu
def test_torch_sees_exactly_the_leased_card(tmp_path: Path, cuda_torch: Any) -> None:
    count = cuda_torch.cuda.device_count()
    output = tmp_path / "probe.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "skilleval.cli",
            "gpu-run",
            "--gpus",
            "1",
            "--devices",
            f"1-{max(count - 1, 1)}" if count > 1 else "0",
            "--protected",
            "" if count == 1 else "0",
            "--lock-dir",
            str(tmp_path),
            "--",
            sys.executable,
            "-m",
            "skilleval.serving.probe",
            "--hold",
            "1",
            "--output",
            str(output),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(output.read_text())
    assert seen["device_count"] == 1
    assert seen["CUDA_VISIBLE_DEVICES"] != "0" or count == 1


def test_under_slurm_a_job_uses_the_cards_slurm_assigned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No lock files: SLURM's ids are per job (renumbered from 0), so two jobs on one node
    may both see card 0; locking by those ids would make them wait for each other."""
    monkeypatch.delenv("SKILLEVAL_GPU_DEVICES", raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")

    def no_locks(*args: object, **kwargs: object) -> None:
        raise AssertionError("a SLURM job took host-wide GPU locks")

    monkeypatch.setattr("skilleval.serving.gpu.gpu_lease", no_locks)
    with job_lease(2) as first, job_lease(2) as second:
        assert first.devices == second.devices == (0, 1)
    with pytest.raises(GpuLeaseError, match="SLURM job 42 was given 2"), job_lease(3):
        pass


def test_outside_slurm_a_job_leases_from_the_profiles_cards(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.setenv("SKILLEVAL_GPU_DEVICES", "0-2")
    with job_lease(2) as lease:
        assert 0 not in lease.devices and len(lease.devices) == 2


@pytest.mark.gpu
def test_a_job_without_a_lease_sees_no_card(tmp_path: Path, cuda_torch: Any) -> None:
    """benchmarks/gpu_leases/no_lease.py in a job's environment, a bare one and under a lease."""
    output = tmp_path / "no_lease.json"
    subprocess.run(
        [sys.executable, str(REPO / "benchmarks/gpu_leases/no_lease.py"), "--output", str(output)],
        check=True,
    )
    seen = json.loads(output.read_text())
    assert seen["job"]["device_count"] == 0 and seen["job"]["auto_device"] == "cpu"
    assert seen["job"]["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert seen["leased"]["device_count"] == 1
    assert seen["leased"]["CUDA_VISIBLE_DEVICES"] == ",".join(map(str, seen["leased"]["lease"]))
