"""The paper says which numbers are simulated, from what answered each run, and nothing
when none is."""

from __future__ import annotations

import json
from pathlib import Path

from skilleval.report.notice import evidence_notice, notice_of, write_notice
from skilleval.report.writer import Section, write_table_set

SIM = {"simulated": True, "by": "the sim policy, in process"}
SERVED = {"simulated": True, "by": "the project's simulated world (skilleval serve-world)"}
REAL = {"simulated": False, "by": "/models/qwen at http://gpu:30000/v1"}
TRAINER = {"simulated": True, "by": "the sim trainer"}


def test_the_notice_follows_what_answered(tmp_path: Path) -> None:
    both = evidence_notice({"a": SIM, "b": SERVED}, {"x": TRAINER})
    assert "every evaluation number comes from the simulated shopping world" in both
    assert "skilleval serve-world" in both and "every ablation number" in both
    some = evidence_notice({"a": REAL, "b": SERVED}, {})
    assert "evaluation runs b come from the simulated shopping world" in some
    assert evidence_notice({"a": REAL}, {"x": {"simulated": False, "by": "train.py"}}) == ""
    unknown = evidence_notice({"a": None, "b": REAL}, {})
    assert unknown.startswith("Unknown: evaluation runs a do not record what served them")
    write_notice(both, str(tmp_path / "notice.tex"), str(tmp_path / "notice.txt"))
    tex = (tmp_path / "notice.tex").read_text()
    assert "\\newcommand{\\simulationnotice}{Simulated evidence:" in tex
    assert "Simulated numbers" in tex
    assert (tmp_path / "notice.txt").read_text().strip() == both
    write_notice("", str(tmp_path / "real.tex"))
    assert "\\newcommand{\\simulatedcaption}{}" in (tmp_path / "real.tex").read_text()


def test_every_table_format_carries_its_notice(tmp_path: Path) -> None:
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"run": "base-free", "simulated": SERVED, "service": {}}))
    notice = notice_of([str(summary)])
    outputs = {ext: str(tmp_path / f"t.{ext}") for ext in ("tex", "csv", "md", "html")}
    runs = Section("Runs", "runs", ("Run", "Reward"), [[r"\texttt{base-free}", "0.5000"]])
    write_table_set(outputs, "tex", [runs], notice)
    csv = Path(outputs["csv"]).read_text().splitlines()
    assert csv[:4] == [f"# {notice}", "# Runs", "Run,Reward", "base-free,0.5000"]
    assert Path(outputs["md"]).read_text().startswith(f"> {notice}")
    assert Path(outputs["html"]).read_text().startswith('<p class="notice">Simulated evidence')
    write_table_set(outputs, "tex", [runs], "")
    assert Path(outputs["csv"]).read_text().startswith("# Runs\nRun,Reward\n")


def test_a_trusted_server_is_named_by_what_it_reported_and_its_weights_as_unchecked(
    tmp_path: Path,
) -> None:
    silent = {
        "simulated": None,
        "by": "the server reported neither its architecture nor its launch command",
    }
    answered = {
        "model": "smollm2.gguf",
        "engine_reported": "llama-cpp-python",
        "engine_version": "0.3.36",
    }
    summary = tmp_path / "summary.json"
    summary.write_text(
        json.dumps(
            {
                "run": "base-free",
                "simulated": silent,
                "service": {"identity_check": "trusted", "answered": answered},
            }
        )
    )
    notice = notice_of([str(summary)])
    assert "answered by smollm2.gguf on llama-cpp-python 0.3.36" in notice
    assert "weights that served were not checked" in notice
    assert (
        "whether evaluation runs base-free are simulated is unknown: the server reported" in notice
    )
    assert "rebuild them" not in notice
