"""A SLURM cluster of three nodes on one machine, for tests: one slurmctld here and one
slurmd in each of three network namespaces that the cluster creates, joined by a bridge
of its own on a private subnet. A node has its own address and loopback (a job there
cannot reach another node's 127.0.0.1), its own name (NodeName, NodeAddr) and its own
fake GPU device files (gres.conf); the filesystem is shared, as a cluster's /home or
/scratch is. Everything it creates (namespaces, links, bridge) carries its prefix and is
removed when it stops; nothing outside them is addressed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tests.engine_slurm import GPUS, PARTITION, SlurmCluster
from tests.engine_slurm import missing_engine as one_node_missing

NODES = ("node1", "node2", "node3")
PREFIX = "skev"
SUBNET = "10.213.7"
BRIDGE = f"{PREFIX}-br"


def missing_engine() -> str | None:
    """Why this machine cannot run the three-node cluster, or None if it can."""
    reason = one_node_missing()
    if reason:
        return reason
    absent = [tool for tool in ("ip", "nsenter") if shutil.which(tool) is None]
    if absent:
        return f"{', '.join(absent)} not installed (the nodes' network namespaces need them)"
    probe = f"{PREFIX}-probe"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"network namespaces cannot be made here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def ip(*argv: str, namespace: str | None = None) -> None:
    inside = ["ip", "netns", "exec", namespace] if namespace else []
    subprocess.run([*inside, "ip", *argv], check=True, capture_output=True, text=True)


@dataclass
class NodesCluster(SlurmCluster):
    """SlurmCluster with its one node replaced by NODES, each in its namespace."""

    node_daemons: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    ctld_address = f"{SUBNET}.1"

    @staticmethod
    def namespace(node: str) -> str:
        return f"{PREFIX}-{node}"

    @staticmethod
    def address(node: str) -> str:
        return f"{SUBNET}.{11 + NODES.index(node)}"

    def node_config(self) -> str:
        cpus = os.cpu_count() or 1
        lines = [
            f"NodeName={n} NodeAddr={self.address(n)} NodeHostname={n} CPUs={cpus} "
            f"RealMemory=4000 Gres=gpu:{GPUS}"
            for n in NODES
        ]
        nodes = ",".join(NODES)
        return "\n".join(
            [*lines, f"PartitionName={PARTITION} Nodes={nodes} Default=YES MaxTime=INFINITE "
             "State=UP", ""]
        )  # fmt: skip

    def extra_config(self) -> str:
        # A node that stops answering is marked down within seconds (SLURM's default
        # JobRequeue=1 stays: profiles/slurm submits with --no-requeue).
        return "SlurmdTimeout=10\n"

    def gres_config(self) -> str:
        own = [
            f"NodeName={n} Name=gpu File={self.root / 'dev' / n}/nvidia[0-{GPUS - 1}]\n"
            for n in NODES
        ]
        return "AutoDetect=off\n" + "".join(own)

    def device_dirs(self) -> list[Path]:
        return [self.root / "dev" / n for n in NODES]

    def _start(self) -> SlurmCluster:
        self._network()
        return super()._start()

    def _network(self) -> None:
        self._remove_network()  # what a killed earlier session may have left
        ip("link", "add", BRIDGE, "type", "bridge")
        ip("addr", "add", f"{self.ctld_address}/24", "dev", BRIDGE)
        ip("link", "set", BRIDGE, "up")
        for index, node in enumerate(NODES, 1):
            ns, host_end, node_end = (
                self.namespace(node),
                f"{PREFIX}-h{index}",
                f"{PREFIX}-n{index}",
            )
            ip("netns", "add", ns)
            ip("link", "add", host_end, "type", "veth", "peer", "name", node_end)
            ip("link", "set", node_end, "netns", ns)
            ip("link", "set", host_end, "master", BRIDGE, "up")
            ip("addr", "add", f"{self.address(node)}/24", "dev", node_end, namespace=ns)
            ip("link", "set", node_end, "up", namespace=ns)
            ip("link", "set", "lo", "up", namespace=ns)

    def _start_nodes(self) -> None:
        # nsenter enters the network namespace only; `ip netns exec` would also mount a
        # /sys of its own, without the cgroup filesystem slurmd reads.
        for node in NODES:
            self._spawn_node(node)

    def _spawn_node(self, node: str) -> None:
        (self.root / "spool" / node).mkdir(parents=True, exist_ok=True)
        netns = f"--net=/run/netns/{self.namespace(node)}"
        self.node_daemons[node] = self._spawn("nsenter", netns, "slurmd", "-D", "-N", node)

    def processes_on(self, node: str) -> list[int]:
        listed = subprocess.run(
            ["ip", "netns", "pids", self.namespace(node)], capture_output=True, text=True
        )
        return [int(pid) for pid in listed.stdout.split()]

    def lose(self, node: str) -> None:
        """The node dies: its slurmd and every process in its namespace are killed at once,
        as a power cut would stop them."""
        for pid in self.processes_on(node):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        daemon = self.node_daemons.pop(node, None)
        if daemon is not None:
            daemon.wait()
            self.processes.remove(daemon)

    def revive(self, node: str) -> None:
        """A lost node back: its slurmd started again and the node resumed."""
        self._spawn_node(node)
        self._wait(lambda: self.answers("scontrol", "update", f"nodename={node}", "state=resume"))
        self._wait(self._all_idle, timeout_s=120)

    def stop(self) -> None:
        for node in NODES:
            self.lose(node)
        super().stop()
        self._remove_network()

    def _remove_network(self) -> None:
        for node in NODES:
            subprocess.run(["ip", "netns", "del", self.namespace(node)], capture_output=True)
        subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True)
