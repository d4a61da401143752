"""What answered is evidence: every episode is stamped with it, a run never mixes two, and
a contrast compares its arms' answers. The model server is the project's sglang stand-in
(skilleval/world/server.py), which names its model as sglang does (--served-model-name,
else the model path) in /v1/models, /model_info and every reply."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from skilleval.analysis.contrast import RunRecords, validity_checks
from skilleval.errors import AnswererChanged, ServiceError
from skilleval.paths import RunFiles
from skilleval.runs.evaluation import evaluate
from skilleval.runs.transcripts import read_transcripts, render
from skilleval.world.server import Faults, WorldServers, start_servers
from tests.conftest import AS_LAUNCHED, read_jsonl
from tests.test_http_path import http_inputs


def serving(
    world: Path, name: str, faults: Faults | None = None, checkpoint: str = "base"
) -> WorldServers:
    weights = world / "checkpoints" / checkpoint / "model.safetensors"
    server_args = {**AS_LAUNCHED, "served_model_name": name}
    return start_servers(str(weights), str(world), 20260830, faults=faults, server_args=server_args)


@pytest.fixture()
def smol(small_world: Path) -> Iterator[WorldServers]:
    servers = serving(small_world, "smol")
    yield servers
    servers.shutdown()


def outputs(folder: Path) -> dict[str, str]:
    return {
        "results_path": str(folder / "results.jsonl"),
        "summary_path": str(folder / "summary.json"),
        "journal_root": str(folder.parent / "journal"),
        "transcripts_path": str(folder / "transcripts.jsonl.gz"),
    }


def interrupt_midway(journal_root: Path) -> int:
    """The journal as a kill midway leaves it: its first half of lines, no kept outputs."""
    (journal,) = journal_root.glob("*/*.jsonl")
    lines = journal.read_text().splitlines(keepends=True)
    journal.write_text("".join(lines[: len(lines) // 2]))
    for kept in journal_root.glob("*/*.complete"):
        shutil.rmtree(kept)
    return len(lines) // 2


def test_a_resumed_run_refuses_another_model_and_resumes_against_the_same(
    small_world: Path, smol: WorldServers, tmp_path: Path
) -> None:
    inputs = http_inputs(small_world, smol.model_url, smol.env_url)
    first = evaluate(inputs, **outputs(tmp_path / "first"))
    kept = interrupt_midway(tmp_path / "journal")
    other = serving(small_world, "smol-b")
    try:
        with pytest.raises(AnswererChanged) as refused:
            evaluate(
                http_inputs(small_world, other.model_url, other.env_url),
                **outputs(tmp_path / "other"),
            )
    finally:
        other.shutdown()
    said = str(refused.value)
    assert "\n" not in said, said
    assert "model smol-b" in said and "model smol," in said, said
    assert "skilleval clean base-S0 --archive" in said
    (journal,) = (tmp_path / "journal").glob("*/*.jsonl")
    assert len(journal.read_text().splitlines()) == kept  # nothing lost, nothing added
    resumed = evaluate(inputs, **outputs(tmp_path / "resumed"))
    assert resumed["provenance"]["execution"]["reused_from_journal"] == kept
    assert read_jsonl(tmp_path / "resumed" / "results.jsonl") == read_jsonl(
        tmp_path / "first" / "results.jsonl"
    )
    answered = resumed["service"]["answered"]
    assert answered == first["service"]["answered"]
    assert answered["episodes_by_identity"] == {answered["identity"]: resumed["n_records"]}
    assert answered["reply_models"] == ["smol"]


def test_a_server_swapped_mid_run_stops_the_run_at_its_reconnect(
    small_world: Path, tmp_path: Path
) -> None:
    slow = Faults(latency_s=0.05)
    servers = serving(small_world, "smol", faults=slow)
    other = serving(small_world, "smol-b")
    swap = threading.Timer(1.0, lambda: swapped(servers, other))
    try:
        swap.start()
        with pytest.raises(AnswererChanged) as stopped:
            evaluate(
                http_inputs(small_world, servers.model_url, servers.env_url),
                **outputs(tmp_path / "run"),
            )
    finally:
        swap.join()
        servers.shutdown()
        other.shutdown()
    # Whichever sees it first: a re-read of the identity after the reconnect, or a reply
    # that names the other model.
    said = str(stopped.value)
    assert "after a reconnect, the model server is model smol-b" in said or (
        "names model 'smol-b', but the run's replies named 'smol'" in said
    ), said
    (journal,) = (tmp_path / "journal").glob("*/*.jsonl")
    stamped = {line["answered"]["server"].split(",")[0] for line in read_jsonl(journal)}
    assert stamped == {"model smol"}  # no episode of the second model was recorded


def swapped(servers: WorldServers, other: WorldServers) -> None:
    """The model server restarted on its port as the other one (its handler, its name)."""
    servers.handlers["model"] = other.handlers["model"]
    servers.restart("model")


def test_journal_lines_and_transcripts_carry_what_answered(
    small_world: Path, smol: WorldServers, tmp_path: Path
) -> None:
    files = outputs(tmp_path / "run")
    evaluate(http_inputs(small_world, smol.model_url, smol.env_url), **files)
    (journal,) = (tmp_path / "journal").glob("*/*.jsonl")
    for line in read_jsonl(journal):
        assert line["answered"]["reply_models"] == ["smol"]
        assert line["answered"]["server"].startswith("model smol, sglang skilleval-sim, weights ")
    episode = read_transcripts(files["transcripts_path"])[0]
    assert episode["answered"]["identity"] == line["answered"]["identity"]
    shown = render(episode).splitlines()[1]
    assert shown.startswith("answered by: model smol, sglang") and "replies named: smol" in shown


def test_a_wrong_base_url_path_is_named_first_with_the_url_requested(
    small_world: Path, smol: WorldServers, tmp_path: Path
) -> None:
    wrong = smol.model_url.removesuffix("/v1") + "/api/v1"
    for changes in ({}, {"model": "smol"}, {"model": "nothing", "engine": "vllm"}):
        inputs = http_inputs(small_world, wrong, smol.env_url, identity="trust", **changes)
        with pytest.raises(ServiceError) as refused:
            evaluate(inputs, **outputs(tmp_path / "run"))
        said = str(refused.value)
        assert said.startswith(f"model server answered HTTP 404 to GET {wrong}/models"), said
        assert "execution.model_server.base_url" in said


def arm(folder: Path, name: str, **answered: Any) -> RunRecords:
    run = RunRecords.load(RunFiles.in_directory(str(folder)))
    service = {**run.summary.service}
    service["answered"] = {**service["answered"], **answered}
    summary = run.summary.model_copy(update={"service": service, "run": name})
    records = [
        {**r, "answered": {**r["answered"], **answered}} if "identity" in answered else r
        for r in run.records
    ]
    return replace(run, name=name, summary=summary, records=records)


def test_a_contrast_of_one_checkpoint_answered_by_two_models_fails_a_named_check(
    small_world: Path, smol: WorldServers, tmp_path: Path
) -> None:
    evaluate(http_inputs(small_world, smol.model_url, smol.env_url), **outputs(tmp_path / "run"))
    control = arm(tmp_path / "run", "control")
    same = {c.name: c for c in validity_checks(control, arm(tmp_path / "run", "treatment"))}
    assert same["same_answerer"].passed and same["one_answerer_treatment"].passed
    other = arm(tmp_path / "run", "treatment", identity="0123456789abcdef", server="model b")
    checks = {c.name: c for c in validity_checks(control, other)}
    assert not checks["same_answerer"].passed
    assert "model b" in checks["same_answerer"].detail
    mixed = replace(control, records=[{**r, "answered": None} for r in control.records[:1]])
    checks = {c.name: c for c in validity_checks(mixed, mixed)}
    assert not checks["one_answerer_control"].passed


def test_a_resumed_run_refuses_other_weights_under_the_same_name(
    small_world: Path, smol: WorldServers, tmp_path: Path
) -> None:
    """identity: trust, so the server's weights are not checked against the registry: what
    answered the journal's episodes is what the resume is held to."""
    trusted = http_inputs(small_world, smol.model_url, smol.env_url, identity="trust")
    evaluate(trusted, **outputs(tmp_path / "first"))
    interrupt_midway(tmp_path / "journal")
    other = serving(small_world, "smol", checkpoint="final")
    try:
        with pytest.raises(AnswererChanged) as refused:
            evaluate(
                http_inputs(small_world, other.model_url, other.env_url, identity="trust"),
                **outputs(tmp_path / "other"),
            )
    finally:
        other.shutdown()
    said = str(refused.value)
    assert "checkpoints/final" in said and "checkpoints/base" in said and "\n" not in said
