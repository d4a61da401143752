"""A one-node SLURM cluster with accounting, started from the Debian packages for tests.

State, logs, the munge key, the MariaDB data and the fake GPU device files live in one
directory. The configs must also be in /etc/slurm: Snakemake's SLURM job-step executor
drops every SLURM_* variable (SLURM_CONF included) before its inner srun, which then finds
only the default path. They are written there only if no other cluster's config is, marked
as the test cluster's, and removed when it stops. Each daemon is stopped by the PID it was
started with, never by name.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("munged", "mariadbd", "mariadb-install-db", "slurmdbd", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "sacct", "sacctmgr", "sinfo", "squeue", "munge")
CLUSTER = "skilleval"
PARTITION = "skilleval-test"
ACCOUNT = "skilleval-lab"
GPUS = 4
CONF_DIR = Path("/etc/slurm")
CONF_FILES = ("slurm.conf", "gres.conf", "slurmdbd.conf")
MARK = "# skilleval test cluster: written and removed by tests/engine_slurm.py\n"
MUNGE_SOCKET = Path("/run/munge/munge.socket.2")


def missing_engine() -> str | None:
    """Why this machine cannot run the cluster, or None if it can."""
    if os.geteuid() != 0:
        return "the SLURM test cluster needs root (it starts munged, MariaDB and slurmd)"
    absent = [tool for tool in (*DAEMONS, *CLIENTS) if shutil.which(tool) is None]
    if absent:
        return f"SLURM engine not installed ({', '.join(absent)} missing): run .ci/install-engines"
    existing = CONF_DIR / "slurm.conf"
    if existing.exists() and not existing.read_text().startswith(MARK):
        return f"{existing} belongs to another SLURM cluster; the test cluster will not replace it"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class SlurmCluster:
    root: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    started_s: float = 0.0

    @property
    def conf(self) -> Path:
        return CONF_DIR / "slurm.conf"

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, check=check)

    def answers(self, *argv: str) -> bool:
        return self.run(*argv, check=False).returncode == 0

    def start(self) -> SlurmCluster:
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> SlurmCluster:
        began = time.monotonic()
        for name in ("state", "spool", "log", "db", "dev", "munge"):
            (self.root / name).mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self._start_munge()
        db_socket = self._start_mariadb()
        ports = {name: free_port() for name in ("ctld", "slurmd", "dbd")}
        self._write_configs(db_socket, ports)
        self._spawn("slurmdbd", "-D")  # reads slurmdbd.conf beside slurm.conf
        self._wait(
            lambda: self.run("sacctmgr", "-n", "list", "cluster", check=False).returncode == 0
        )
        self.run("sacctmgr", "-i", "add", "cluster", CLUSTER)
        self.run("sacctmgr", "-i", "add", "account", ACCOUNT, f"Cluster={CLUSTER}")
        self.run("sacctmgr", "-i", "add", "user", "root", f"Account={ACCOUNT}")
        self._spawn("slurmctld", "-D", "-i")
        self._start_nodes()
        self._wait(self._all_idle)
        self.started_s = time.monotonic() - began
        return self

    @property
    def node(self) -> str:
        return socket.gethostname().split(".")[0]

    # Where slurmctld listens for the nodes, and the nodes themselves: this host, once.
    ctld_address = "127.0.0.1"

    def node_config(self) -> str:
        gpus = f"Gres=gpu:{GPUS}"
        return (
            f"NodeName={self.node} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} RealMemory=4000 "
            f"{gpus}\nPartitionName={PARTITION} Nodes={self.node} Default=YES "
            "MaxTime=INFINITE State=UP\n"
        )

    def gres_config(self) -> str:
        return f"AutoDetect=off\nName=gpu File={self.root / 'dev'}/nvidia[0-{GPUS - 1}]\n"

    def device_dirs(self) -> list[Path]:
        return [self.root / "dev"]

    def extra_config(self) -> str:
        return ""

    def _start_nodes(self) -> None:
        self._spawn("slurmd", "-D", "-N", self.node)

    def _all_idle(self) -> bool:
        states = self.run("sinfo", "-h", "-N", "-o", "%t", check=False).stdout.split()
        return bool(states) and all(state == "idle" for state in states)

    def _spawn(self, *argv: str) -> subprocess.Popen[bytes]:
        log = open(self.root / "log" / f"{Path(argv[0]).name}.out", "ab")  # noqa: SIM115
        process = subprocess.Popen(argv, env=self.env, stdout=log, stderr=log)
        self.processes.append(process)
        return process

    def _wait(self, ready, timeout_s: float = 60.0) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout_s
        while not ready():
            dead = [p.args for p in self.processes if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                logs = {p.name: p.read_text()[-1500:] for p in (self.root / "log").glob("*")}
                raise RuntimeError(f"SLURM test cluster did not come up (exited: {dead}): {logs}")
            time.sleep(0.3)

    def _start_munge(self) -> None:
        """Slurm's clients reach munge only through its default socket (sacctmgr ignores
        AuthInfo), so a munged already answering there is used; otherwise one is started
        on it with a key of its own, and removed with the cluster."""
        if self.answers("munge", "-n"):
            return
        munge = self.root / "munge"
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        MUNGE_SOCKET.parent.mkdir(parents=True, exist_ok=True)
        self._spawn(
            "munged",
            "--foreground",
            "--force",
            f"--key-file={key}",
            f"--socket={MUNGE_SOCKET}",
            f"--pid-file={munge / 'munged.pid'}",
            f"--seed-file={munge / 'munge.seed'}",
            f"--log-file={self.root / 'log' / 'munged.log'}",
        )
        self._wait(lambda: self.answers("munge", "-n"))

    def _start_mariadb(self) -> Path:
        data = self.root / "db" / "data"
        subprocess.run(
            [
                "mariadb-install-db",
                f"--datadir={data}",
                "--user=root",
                "--skip-test-db",
                "--auth-root-authentication-method=normal",
            ],
            capture_output=True,
            check=True,
        )
        db_socket = self.root / "db" / "mysqld.sock"
        self.db_port = free_port()
        self._spawn(
            "mariadbd",
            "--no-defaults",
            f"--datadir={data}",
            "--user=root",
            f"--socket={db_socket}",
            f"--pid-file={self.root / 'db' / 'mysqld.pid'}",
            f"--port={self.db_port}",
            "--bind-address=127.0.0.1",
        )
        self._wait(lambda: db_socket.exists())
        return db_socket

    def _write_configs(self, db_socket: Path, ports: dict[str, int]) -> None:
        for folder in self.device_dirs():
            folder.mkdir(parents=True, exist_ok=True)
            for index in range(GPUS):
                device = folder / f"nvidia{index}"
                if not device.exists():
                    os.mknod(device, 0o666 | 0o020000, os.makedev(195, index))
        CONF_DIR.mkdir(parents=True, exist_ok=True)
        self.conf.write_text(
            f"""{MARK}ClusterName={CLUSTER}
SlurmctldHost={self.node}({self.ctld_address})
SlurmctldPort={ports["ctld"]}
SlurmdPort={ports["slurmd"]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation={self.root / "state"}
SlurmdSpoolDir={self.root / "spool" / "%n"}
SlurmctldPidFile={self.root / "slurmctld.pid"}
SlurmdPidFile={self.root / "slurmd-%n.pid"}
SlurmctldLogFile={self.root / "log" / "slurmctld.log"}
SlurmdLogFile={self.root / "log" / "slurmd-%n.log"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
MpiDefault=none
ReturnToService=2
MinJobAge=300
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={ports["dbd"]}
AccountingStorageTRES=gres/gpu
AccountingStoreFlags=job_comment
# Each job's CPU seconds for sacct's TotalCPU (benchmarks/bench_cluster_ablation.py).
JobAcctGatherType=jobacct_gather/linux
{self.extra_config()}{self.node_config()}"""
        )
        (CONF_DIR / "gres.conf").write_text(f"{MARK}{self.gres_config()}")
        dbd = CONF_DIR / "slurmdbd.conf"
        dbd.write_text(
            f"""{MARK}AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={ports["dbd"]}
SlurmUser=root
PidFile={self.root / "slurmdbd.pid"}
LogFile={self.root / "log" / "slurmdbd.log"}
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={self.db_port}
StorageUser=root
StorageLoc=slurm_acct_db
"""
        )
        dbd.chmod(0o600)

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGTERM)
        for process in reversed(self.processes):
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for name in CONF_FILES:
            path = CONF_DIR / name
            if path.exists() and path.read_text().startswith(MARK):
                path.unlink()
