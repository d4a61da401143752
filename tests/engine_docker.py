"""A Docker engine of the tests' own, and an image that runs the project's test server.

dockerd runs with its data, state and socket in one directory (vfs storage, no bridge, no
iptables: containers use the host's network), is reached through DOCKER_HOST and is stopped
by the PID it was started with. No registry is reachable, so the image is imported from a
root filesystem of symlinks; the host's /usr, Python and the project are bound read-only by
the launcher (``launch.mounts``), so the container runs this very checkout.
"""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

IMAGE = "skilleval-test-server:local"
ROOT_LINKS = {"bin": "usr/bin", "lib": "usr/lib", "lib64": "usr/lib64", "sbin": "usr/sbin"}
ROOT_DIRS = ("usr", "tmp", "etc", "proc", "sys", "dev", "root", "run")


def missing_engine() -> str | None:
    if os.geteuid() != 0:
        return "the Docker test engine needs root (it starts dockerd)"
    absent = [tool for tool in ("dockerd", "containerd", "runc") if shutil.which(tool) is None]
    if absent:
        return f"Docker engine not installed ({', '.join(absent)} missing): run .ci/install-engines"
    try:
        import docker  # noqa: F401
    except ImportError:
        return "the docker SDK is missing: pip install -e '.[dev]'"
    return None


def host_mounts(*extra: Path) -> list[str]:
    """What the test server needs from the host: libc and friends, the interpreter, the venv
    and the project (an editable install points there)."""
    paths = {"/usr", os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)}
    paths.update(os.path.realpath(p) for p in extra)
    # A bind inside another bind is redundant; keep the outermost.
    return sorted(p for p in paths if not any(p != q and p.startswith(q + "/") for q in paths))


def root_filesystem() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in ROOT_DIRS:
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for name, target in ROOT_LINKS.items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return buffer.getvalue()


@dataclass
class DockerEngine:
    root: Path
    process: subprocess.Popen[bytes] | None = None
    host: str = ""
    started_s: float = 0.0
    image_s: float = 0.0
    env: dict[str, str] = field(default_factory=dict)

    def start(self) -> DockerEngine:
        began = time.monotonic()
        self.root.mkdir(parents=True, exist_ok=True)
        self.host = f"unix://{self.root / 'docker.sock'}"
        log = open(self.root / "dockerd.log", "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [
                "dockerd",
                f"--data-root={self.root / 'data'}",
                f"--exec-root={self.root / 'exec'}",
                f"--pidfile={self.root / 'dockerd.pid'}",
                f"--host={self.host}",
                "--iptables=false",
                "--ip6tables=false",
                "--bridge=none",
                "--storage-driver=vfs",
            ],
            stdout=log,
            stderr=log,
        )
        self.env = {**os.environ, "DOCKER_HOST": self.host}
        deadline = time.monotonic() + 60
        while not self._answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = (self.root / "dockerd.log").read_text()[-2000:]
                raise RuntimeError(f"dockerd did not come up:\n{tail}")
            time.sleep(0.3)
        self.started_s = time.monotonic() - began
        began = time.monotonic()
        repository, tag = IMAGE.split(":")
        self.client().api.import_image_from_data(root_filesystem(), repository=repository, tag=tag)
        self.image_s = time.monotonic() - began
        return self

    def client(self) -> Any:
        import docker

        return docker.DockerClient(base_url=self.host)

    def _answers(self) -> bool:
        try:
            return bool(self.client().ping())
        except Exception:
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        # dockerd leaves its default network namespace mounted under exec-root.
        mounted = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
        for point in sorted((m for m in mounted if m.startswith(f"{self.root}/")), reverse=True):
            subprocess.run(["umount", point], check=False)
