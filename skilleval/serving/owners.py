"""Who owns a launched server: a process named by host, pid and start time.

A pid alone is not an owner: after the owner dies the kernel may hand its pid to another
process. The start time (field 22 of /proc/PID/stat, clock ticks since boot) tells a
reused pid from the owner, so a server whose owner is gone is found however long ago.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path


def process_start(pid: int) -> str | None:
    """The live process's start time in clock ticks since boot (/proc/PID/stat field 22);
    None when there is no such process or only its zombie (killed, not yet reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state, *fields = stat.rsplit(")", 1)[1].split()
    return None if state in ("Z", "X") else fields[18]


def owner_token(pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{process_start(pid)}"


def owner_alive(token: str) -> bool:
    """Whether the process a token names still runs (on another host: assumed alive)."""
    host, pid, started = token.rsplit(":", 2)
    if host != socket.gethostname():
        return True
    return process_start(int(pid)) == started
