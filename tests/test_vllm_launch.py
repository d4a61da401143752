"""vLLM's launch line, checked against vLLM's own argument parser as its wheel declares it
(read from the wheel, never installed: it brings several GB of CUDA)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from skilleval.protocol.sections import Served
from skilleval.serving.engines import ENGINES
from skilleval.serving.engines.vllm import arguments

pytestmark = pytest.mark.slow

VLLM = "vllm==0.34.0"
# Where `vllm serve` registers its options (make_arg_parser in cli_args.py: explicit
# add_argument calls, FrontendArgs' dataclass fields, and EngineArgs.add_cli_args).
PARSER_SOURCES = ("vllm/entrypoints/common/cli_args.py", "vllm/engine/arg_utils.py")
FRONTEND_CLASSES = ("BaseFrontendArgs", "FrontendArgs")
SERVED = Served(tp=2, dp_size=4, tool_call_parser="qwen3_coder", reasoning_parser="qwen3")


@pytest.fixture(scope="module")
def vllm_wheel() -> Path:
    """vLLM's wheel from the package index (kept between runs), never installed."""
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "skilleval-wheels"
    found = sorted(cache.glob("vllm-0.34.0-*.whl"))
    if not found:
        download = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", VLLM]
        subprocess.run([*download, "-d", str(cache)], check=True, timeout=600)
        found = sorted(cache.glob("vllm-0.34.0-*.whl"))
    return found[0]


def serve_options(wheel: Path) -> set[str]:
    """Every option string `vllm serve` accepts, from the parser's source in the wheel."""
    options: set[str] = set()
    with zipfile.ZipFile(wheel) as archive:
        trees = [ast.parse(archive.read(name).decode()) for name in PARSER_SOURCES]
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
                options |= {
                    a.value
                    for a in node.args
                    if isinstance(a, ast.Constant) and str(a.value).startswith("-")
                }
            if isinstance(node, ast.ClassDef) and node.name in FRONTEND_CLASSES:
                options |= {
                    f"--{s.target.id.replace('_', '-')}"
                    for s in node.body
                    if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                }
    return options


def test_every_flag_of_the_launch_line_is_one_vllm_serve_accepts(vllm_wheel: Path) -> None:
    options = serve_options(vllm_wheel)
    line = arguments("/models/qwen/model.safetensors", SERVED, 30001, "skilleval/run/gpu1")
    flags = [word for word in line if word.startswith("--")]
    assert {"--tensor-parallel-size", "--enable-auto-tool-choice", "--port"} <= set(flags)
    assert [f for f in flags if f not in options] == []
    # The check can fail: sglang's spelling of the same setting is no vLLM option.
    assert "--tp-size" not in options and "--sampling-defaults" not in options


def test_the_run_launches_vllm_with_its_own_readiness_path() -> None:
    launch = ENGINES["vllm"].launch
    assert launch is not None and launch.ready_path == "/health"
    no_parsers = Served(tp=None, dp_size=None, tool_call_parser=None, reasoning_parser=None)
    line = arguments("/models/qwen/model.safetensors", no_parsers, 30001, "n")
    assert "--enable-auto-tool-choice" not in line and "--tensor-parallel-size" not in line
    assert line[line.index("--generation-config") + 1] == "vllm"
