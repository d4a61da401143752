"""What a model run's cluster job asks for: CPUs, host memory and time, from its protocol.

A run's job holds the agent (one Python process: its ``concurrency`` episode threads share
one interpreter, so one core) and, when it launches the model server itself, sglang.
sglang 0.5.23, the protocol's pinned image (sglang/srt/entrypoints/engine.py,
``_launch_scheduler_processes`` and ``_launch_detokenizer_subprocesses``), starts one
scheduler process per card (tp x dp), a data-parallel controller when dp > 1, one
detokenizer process (``detokenizer_worker_num`` defaults to 1), and keeps the tokenizer
manager and HTTP server in its main process: each is a busy loop that wants a core.

Host memory: each scheduler process holds a CUDA context and torch (about
``SCHEDULER_HOST_MB``), and the weights pass through host memory once as they load (a
cgroup counts the page cache of the safetensors files it reads). Time: the server's
start-up limit plus twice the wall time this run's last summary recorded, or
``UNMEASURED_RUN_S`` before any run was measured. A job that runs out of time loses
nothing: its finished tasks are in the journal and the resubmitted job resumes there.

These are estimates for a cluster job's request, never checked against a result; a site
overrides any of them per rule in its profile (``set-resources: eval_run: mem_mb: ...``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from skilleval.protocol.sections import ModelServer
from skilleval.provenance.durations import last_wall_s
from skilleval.serving.gpu import cards_for

AGENT_CPUS = 1
AGENT_MB = 4000
SCHEDULER_HOST_MB = 6000
# sglang's processes besides the schedulers: the detokenizer and the main process.
SGLANG_OTHER_PROCESSES = 2
UNMEASURED_RUN_S = 6 * 3600
RUNTIME_MARGIN = 2.0


@dataclass(frozen=True)
class JobSize:
    """A cluster job's request, in the resource names the SLURM plugin reads."""

    cpus_per_task: int
    mem_mb: int
    runtime: int  # minutes


def sglang_processes(tp: int, dp: int) -> int:
    """Busy processes of one sglang server (see the module's docstring)."""
    return tp * dp + (1 if dp > 1 else 0) + SGLANG_OTHER_PROCESSES


def weights_mb(files: Iterable[str | Path]) -> int:
    """Size of the weight files on disk; a file the graph has not built yet counts 0 (only
    the simulated world builds its checkpoints, and those are kilobytes)."""
    total = sum(Path(f).stat().st_size for f in files if Path(f).is_file())
    return math.ceil(total / 2**20)


def run_job_size(
    model_server: str,
    server: ModelServer,
    weight_files: Iterable[str | Path],
    summary: Path,
) -> JobSize:
    """The request of a run's job under the ``model_server`` backend and its model server
    (RunInputs.model_server: what it serves and how it is launched)."""
    cards = cards_for(model_server, server.tp, server.dp_size)
    launches = cards > 0
    tp, dp = server.tp or 1, server.dp_size or 1
    cpus = AGENT_CPUS + (sglang_processes(tp, dp) if launches else 0)
    mem = AGENT_MB + (cards * SCHEDULER_HOST_MB + weights_mb(weight_files) if launches else 0)
    startup = server.launch.startup_timeout_s if launches and server.launch else 0.0
    measured = last_wall_s(summary)
    run_s = UNMEASURED_RUN_S if measured is None else RUNTIME_MARGIN * measured
    return JobSize(cpus, mem, math.ceil((startup + run_s) / 60))
