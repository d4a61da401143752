"""A run reads its protocol as typed values down to the request (issue 62): no string-key
lookup of a protocol value is left in the layers a run's job executes. The one place a
typed protocol becomes a mapping is the identity and params edge, runs/inputs.py."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel

from skilleval.protocol import sections

PACKAGE = Path(sections.__file__).parents[1]
JOB_LAYERS = ("runs", "policy", "serving")
EDGE = PACKAGE / "runs" / "inputs.py"
# What a protocol value is held in where it is still a mapping: its sections' names, and
# the names the code gave the merged views before they were typed.
HOLDERS = (
    "protocol",
    "sampling",
    "runtime",
    "server",
    "served",
    "execution",
    "model_server",
    "environment",
    "launch",
    "metrics",
    "tasks",
    "prompt",
    "settings",
)
LOOKUP = re.compile(rf"""\b({"|".join(HOLDERS)})(?:\[["'](\w+)["']\]|\.get\(["'](\w+)["'])""")


def protocol_keys() -> set[str]:
    """Every key a protocol section declares."""
    return {
        key
        for model in vars(sections).values()
        if isinstance(model, type) and issubclass(model, BaseModel)
        for key in model.model_fields
    }


def lookups(source: str, keys: set[str]) -> list[str]:
    found = []
    for number, line in enumerate(source.splitlines(), 1):
        for match in LOOKUP.finditer(line):
            if (match.group(2) or match.group(3)) in keys:
                found.append(f"{number}: {match.group(0)}")
    return found


def test_no_string_key_lookup_of_a_protocol_value_in_a_run_s_layers() -> None:
    keys = protocol_keys()
    assert {"temperature", "max_steps", "base_url", "tp", "startup_timeout_s"} <= keys
    found = {
        str(path.relative_to(PACKAGE)): hits
        for layer in JOB_LAYERS
        for path in sorted((PACKAGE / layer).rglob("*.py"))
        if path != EDGE and (hits := lookups(path.read_text(), keys))
    }
    assert found == {}, "read these as attributes of the typed protocol (skilleval.protocol)"


def test_the_grep_sees_the_lookups_it_forbids() -> None:
    keys = protocol_keys()
    planted = (
        'top_k = sampling["top_k"]\n'
        "steps = inputs.protocol['runtime']\n"
        'url = server.get("base_url")\n'
        'timeout = launch["startup_timeout_s"]\n'
    )
    assert len(lookups(planted, keys)) == 4
    # A server's own report and a request body are no protocol values.
    assert lookups('version = report.get("version")\nbody["seed"] = 1\n', keys) == []
