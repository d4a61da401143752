"""The paper says which numbers are simulated, from the config, and nothing when none is."""

from __future__ import annotations

from pathlib import Path

from skilleval.report.notice import simulation_notice, write_notice
from tests.conftest import load_default_config


def test_the_notice_follows_the_backends(tmp_path: Path) -> None:
    config = load_default_config()
    both = simulation_notice(config, "sim")
    assert "simulated shopping world" in both and "simulated trainer" in both
    assert "qwen35-4b-base-hf" in both and str(config["world"]["seed"]) in both
    real_policy = {**config, "backends": {**config["backends"], "policy": "openai"}}
    assert simulation_notice(real_policy, "sim") == (
        "Simulated evidence: every ablation number comes from the simulated trainer."
    )
    assert simulation_notice(real_policy, "command") == ""
    write_notice(both, str(tmp_path / "notice.tex"))
    tex = (tmp_path / "notice.tex").read_text()
    assert "\\newcommand{\\simulationnotice}{Simulated evidence:" in tex
    assert "Simulated numbers" in tex
    write_notice("", str(tmp_path / "real.tex"))
    assert "\\newcommand{\\simulatedcaption}{}" in (tmp_path / "real.tex").read_text()
