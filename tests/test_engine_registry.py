"""Adding a serving engine is one module (issue 62): dropped into serving/engines of a copy
of the package, with nothing else edited, it is registered, the config schema accepts its
name, and a model run's evidence code covers it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

# A new engine, as a lab would write it: Hugging Face's Text Generation Inference.
NEW_ENGINE = '''"""Text Generation Inference: its sampling dialect and how it is told."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skilleval.serving.engines.base import Engine, Identified


def identify(identity: Mapping[str, Any]) -> Identified | None:
    """TGI's /v1/models cards say ``owned_by: huggingface``."""
    if "huggingface" in (identity.get("owned_by") or []):
        return "tgi", None, "/v1/models: owned_by 'huggingface'"
    return None


ENGINE = Engine("tgi", None, {}, "TGI's OpenAI-compatible chat: top_k left out", identify)
'''

ASK = """
import json
from skilleval.config.schema import load_schema
from skilleval.provenance.code import module_closure
from skilleval.provenance.evidence import MODEL_RUN_MODULES
from skilleval.serving.engines import ENGINES, identify
def enums(node):
    if isinstance(node, dict):
        engine = node.get("properties", {}).get("engine", {})
        yield from ([engine["enum"]] if "enum" in engine else [])
        for value in node.values():
            yield from enums(value)
    elif isinstance(node, list):
        for value in node:
            yield from enums(value)
(schema,) = enums(load_schema("config"))
print(json.dumps({
    "registered": sorted(ENGINES),
    "schema": schema,
    "told": identify({"owned_by": ["huggingface"]})[0],
    "evidence": "skilleval.serving.engines.tgi" in module_closure(MODEL_RUN_MODULES),
}))
"""


def test_a_new_engine_is_one_module(tmp_path: Path) -> None:
    package = tmp_path / "skilleval"
    shutil.copytree(REPO / "skilleval", package, ignore=shutil.ignore_patterns("__pycache__"))
    (package / "serving" / "engines" / "tgi.py").write_text(NEW_ENGINE)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    asked = subprocess.run(
        [sys.executable, "-c", ASK], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert asked.returncode == 0, asked.stderr
    found = json.loads(asked.stdout)
    assert "tgi" in found["registered"] and "sglang" in found["registered"]
    assert "tgi" in found["schema"] and None in found["schema"]
    assert found["told"] == "tgi"
    assert found["evidence"] is True
