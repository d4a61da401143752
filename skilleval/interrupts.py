"""Quiet interrupts: SIGINT or SIGTERM ends a rule script or a CLI command with one line.

Ctrl-C in a terminal signals the whole process group, so every running rule script gets
it; Python's default (KeyboardInterrupt, or death by SIGTERM) prints a traceback from
whatever each script was doing. Here both signals raise ``Interrupted``, a SystemExit
with the shell's code (128 + the signal), which the job's log context (skilleval.logs)
notes in one line; Python prints no traceback for a SystemExit.
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)
# Where Snakemake writes a rule's script before running it with Python (snakemake/script
# /__init__.py: ScriptBase writes it under the persistence's script_path).
RULE_SCRIPT_DIR = "/.snakemake/scripts/"


class Interrupted(SystemExit):
    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signal_name = signal.Signals(signum).name


def _raise_interrupted(signum: int, _frame: FrameType | None) -> None:
    raise Interrupted(signum)


def quiet_interrupts() -> None:
    """SIGINT and SIGTERM raise Interrupted from now on (the main thread only can)."""
    if threading.current_thread() is threading.main_thread():
        for signum in SIGNALS:
            signal.signal(signum, _raise_interrupted)


def is_rule_script() -> bool:
    return bool(sys.argv) and RULE_SCRIPT_DIR in sys.argv[0]
