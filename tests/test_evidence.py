"""Evidence identity: which code counts, what a run is keyed by, and the early cutoff.

The graph-level corpus (edits on a built graph, each followed by a dry run and a build)
is in tests/test_staleness.py; these are the same guarantees one layer down.
"""

from __future__ import annotations

import copy
import json
import subprocess
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from skilleval.ablation import run as ablation_run
from skilleval.ablation.matrix import load_matrix
from skilleval.ablation.plan import PlannedRun, effective_config, plan
from skilleval.errors import ConfigError, SkillevalError
from skilleval.provenance import evidence, identity
from skilleval.provenance.code import SourceCache
from skilleval.provenance.digests import FileDigests
from skilleval.runs import evaluation
from skilleval.runs.evaluation import evaluate
from skilleval.runs.inputs import FILE_FIELDS, NOT_GIVEN, RunInputs, protocol_digest
from skilleval.runs.resolve import resolve
from skilleval.workflow.rule_inputs import AblationInputs
from tests.conftest import REPO, plan_of, run_inputs, with_trainer

MATRIX_FILE = REPO / "config" / "ablation" / "matrix.yaml"


@pytest.mark.parametrize(
    "closure",
    [
        evidence.run_closure(
            REPO / "scripts" / evidence.MODEL_RUN_SCRIPT, evidence.MODEL_RUN_MODULES
        ),
        evidence.run_closure(modules=evidence.TRAINER_RUN_MODULES),
    ],
    ids=["model run", "trainer run"],
)
def test_every_module_a_run_imports_is_declared_evidence_or_not(closure: list[str]) -> None:
    missing = evidence.unclassified(closure)
    assert missing == [], (
        f"{missing}: add each to EVIDENCE or NOT_EVIDENCE in skilleval/provenance/evidence.py, "
        "with the reason it can (or cannot) change a run's result"
    )
    assert len(closure) > 20  # the closure is really followed, not just the entry module


def test_a_module_in_no_table_counts_as_evidence() -> None:
    for module in ("skilleval.runs.new_scoring", "skilleval.serving.new_batcher"):
        assert evidence.classification(module) is None
        assert evidence.counts_as_evidence(module)
    # A package marker covers itself only, never the modules added under it.
    assert evidence.is_package_marker("skilleval.serving")
    assert not evidence.is_package_marker("skilleval.env.rollout")


def test_messages_and_log_format_are_in_no_code_identity() -> None:
    model = evidence.model_run_code()
    assert "skilleval/env/rollout.py" in model and "skilleval/world/sim_policy.py" in model
    assert "skilleval/errors.py" not in model and "skilleval/logs.py" not in model
    assert "skilleval/analysis/bootstrap.py" not in model
    assert "skilleval/ablation/trainer.py" in evidence.trainer_run_code()
    cheap = evidence.rule_code(REPO / "scripts" / "freeze_bank.py", cache=SourceCache())
    assert "skilleval/analysis/ranking.py" in cheap or "skilleval/analysis/bootstrap.py" in cheap
    assert not {"skilleval/errors.py", "skilleval/logs.py"} & set(cheap)


def test_a_runs_settings_hold_no_path_and_round_trip(small_world: Path) -> None:
    inputs = run_inputs(small_world)
    settings = inputs.settings()
    assert not set(FILE_FIELDS.values()) & set(settings)
    assert str(small_world) not in json.dumps(settings)
    job = RunInputs.from_settings(settings, inputs.files(), inputs.execution())
    assert job.settings() == settings
    # Typed as the plan's down to the request; only the description (wording) stays behind.
    assert job.protocol == inputs.protocol.model_copy(update={"description": NOT_GIVEN})
    assert replace(job, protocol=inputs.protocol) == inputs


# Settings that say where the servers are and how long to wait for them (issue 45), each
# a key of the protocol's execution section: each is an overlay that, on a GPU host, must
# not cost a single evaluation again.
EXECUTION_OVERLAYS = {
    "model server port": ("model_server", "base_url", "http://127.0.0.1:30016/v1"),
    "request timeout": ("model_server", "request_timeout_s", 900),
    "start-up limit": ("model_server", "launch", {"startup_timeout_s": 1800}),
    "environment address": ("environment", "url", "http://envs.example.org:5700"),
    "environment beside the run": ("environment", "beside_run", False),
    "outage budget": (None, "outage_budget_s", 7200),
    "key variable": ("model_server", "api_key_env", "OTHER_KEY"),
}


def execution_node(protocol: dict[str, Any], section: str | None) -> dict[str, Any]:
    node: dict[str, Any] = protocol["execution"]
    return node if section is None else node.setdefault(section, {})


@pytest.mark.parametrize("overlay", sorted(EXECUTION_OVERLAYS))
def test_execution_settings_reach_no_params_and_come_back_for_the_job(overlay: str) -> None:
    section, key, value = EXECUTION_OVERLAYS[overlay]
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    before = plan_of(config)
    edited = copy.deepcopy(config)
    for protocol in edited["protocols"].values():
        node = execution_node(protocol, section)
        old = node.get(key)
        if isinstance(value, dict) and old is None:
            continue  # a protocol whose server is not ours has no launch to change
        node[key] = {**old, **value} if isinstance(value, dict) else value
    after = plan_of(edited)
    assert set(after.runs) == set(before.runs)
    for name, run in before.runs.items():
        inputs = before.run_inputs(run)
        assert after.run_inputs(after.runs[name]).settings() == inputs.settings(), name
        execution = after.config.protocols[inputs.protocol_name].execution
        job = RunInputs.from_settings(inputs.settings(), inputs.files(), execution)
        executed = execution_node(job.protocol.settings(), section)[key]
        assert executed == execution_node(edited["protocols"][inputs.protocol_name], section)[key]
        assert protocol_digest(inputs.protocol_name, job.protocol) == protocol_digest(
            inputs.protocol_name, inputs.protocol
        )


def test_the_fingerprint_follows_the_evidence_code_not_the_paths(
    small_world: Path, tmp_path: Path
) -> None:
    inputs = run_inputs(small_world)
    code = evidence.model_run_code()
    first = resolve(inputs, code).fingerprint
    assert resolve(inputs, {**code, "skilleval/env/rollout.py": "edited"}).fingerprint != first
    copied = tmp_path / "copy.json"
    copied.write_bytes(Path(inputs.split_file).read_bytes())
    files = {**inputs.files(), "split_file": str(copied)}
    moved = RunInputs.from_settings(inputs.settings(), files, inputs.execution())
    assert resolve(moved, code).fingerprint == first


def no_server(*args: object, **kwargs: object) -> Any:
    raise AssertionError("the run started its server although its result was kept")


def outputs(tmp_path: Path) -> tuple[str, str]:
    return str(tmp_path / "r.jsonl"), str(tmp_path / "s.json")


def test_a_kept_result_is_restored_byte_for_byte_without_a_server(
    small_world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs = run_inputs(small_world)
    results, summary = outputs(tmp_path)
    evaluate(inputs, results, summary, str(tmp_path / "journal"))
    built = {p: Path(p).read_bytes() for p in (results, summary)}
    for path in built:
        Path(path).unlink()  # Snakemake deletes a job's outputs before it runs it
    monkeypatch.setattr(evaluation, "served", no_server)
    restored = evaluate(inputs, results, summary, str(tmp_path / "journal"))
    assert {p: Path(p).read_bytes() for p in built} == built
    assert restored["provenance"]["execution"]["ran"] == 48


def test_a_reverted_change_revives_its_archived_journal(
    small_world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs = run_inputs(small_world)
    results, summary = outputs(tmp_path)
    journal = str(tmp_path / "journal")
    first = evaluate(inputs, results, summary, journal)
    changed = evaluate(inputs, results, summary, journal, code={"skilleval/env/rollout.py": "x"})
    assert changed["fingerprint"] != first["fingerprint"]
    assert changed["provenance"]["execution"]["reused_from_journal"] == 0
    why = json.loads(next((tmp_path / "archive" / "journal").rglob("why.json")).read_text())
    assert why["changed_inputs"] == ["code_fingerprint"]
    assert "skilleval/env/rollout.py" in why["changed_code"]
    monkeypatch.setattr(evaluation, "served", no_server)
    back = evaluate(inputs, results, summary, journal)
    assert back["fingerprint"] == first["fingerprint"]
    assert json.loads(Path(summary).read_text()) == json.loads(json.dumps(first))


def test_another_registered_system_prompt_is_another_run(small_world: Path, tmp_path: Path) -> None:
    """The prompt files are protocol: their contents are in the identity, their names in
    the summary; an identical copy under another name is the same run."""
    inputs = run_inputs(small_world, run="base-S0")
    results, summary = outputs(tmp_path)
    journal = str(tmp_path / "journal")
    first = evaluate(inputs, results, summary, journal)
    copy = tmp_path / "copy.system.txt"
    copy.write_bytes(Path(inputs.system_prompt_file).read_bytes())
    same = evaluate(replace(inputs, system_prompt_file=str(copy)), results, summary, journal)
    assert same["fingerprint"] == first["fingerprint"]
    terse = tmp_path / "terse.system.txt"
    terse.write_text("You are a terse shopping assistant. Buy one product.\n")
    other = evaluate(replace(inputs, system_prompt_file=str(terse)), results, summary, journal)
    assert other["prompt_hash"] != first["prompt_hash"]
    assert other["prompt_files"] == {"system": "terse.system.txt", "skill_template": "skills.j2"}
    assert other["provenance"]["execution"]["reused_from_journal"] == 0
    why = json.loads(next((tmp_path / "archive" / "journal").rglob("why.json")).read_text())
    assert why["changed_inputs"] == ["prompt_hash"]
    template = tmp_path / "bad.j2"
    template.write_text("{{ system }} {{ skill_list }}")
    with pytest.raises(SkillevalError, match=r"bad\.j2: 'skill_list' is undefined"):
        evaluate(replace(inputs, skill_template_file=str(template)), results, summary, journal)


def test_a_kept_ablation_run_is_restored_without_its_trainer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    matrix = load_matrix(str(MATRIX_FILE))
    run = plan(matrix)[0]
    paths = {"summary": str(tmp_path / "run" / "summary.json"), "audit": str(tmp_path / "a.json")}
    kept = str(tmp_path / "kept")
    ablation_run.build_and_audit(run, matrix, paths["summary"], paths["audit"], "id1", kept)
    built = {p: Path(p).read_bytes() for p in paths.values()}
    for path in built:
        Path(path).unlink()

    def no_trainer(*args: object) -> None:
        raise AssertionError("the trainer was launched although the run was kept")

    monkeypatch.setattr(ablation_run, "build_run", no_trainer)
    ablation_run.build_and_audit(run, matrix, paths["summary"], paths["audit"], "id1", kept)
    assert {p: Path(p).read_bytes() for p in built} == built
    with pytest.raises(AssertionError, match="trainer was launched"):
        ablation_run.build_and_audit(run, matrix, paths["summary"], paths["audit"], "id2", kept)


def test_the_sim_job_trains_only_runs_without_a_kept_result_and_outlives_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the runs write under results/, as in the graph
    matrix = load_matrix(str(MATRIX_FILE))
    first, second, third = (run.run_id for run in plan(matrix)[:3])
    kept = str(tmp_path / "kept")
    ablation_run.build_and_audit_all(str(MATRIX_FILE), {first: "a", second: "b"}, kept)
    trained: list[str] = []
    real_build = ablation_run.build_run

    def counted(run: PlannedRun, *args: Any) -> dict[str, Any]:
        trained.append(run.run_id)
        if run.run_id == second:
            raise SkillevalError("the trainer crashed")
        return real_build(run, *args)

    monkeypatch.setattr(ablation_run, "build_run", counted)
    identities = {first: "a", second: "b2", third: "c"}
    with pytest.raises(SkillevalError, match=f"1 of 3 ablation runs failed \\({second}\\)"):
        ablation_run.build_and_audit_all(str(MATRIX_FILE), identities, kept)
    assert trained == [second, third]  # the first is restored from its kept result
    assert (Path(kept) / third / "c.complete").is_dir()
    assert not (Path(kept) / second / "b2.complete").exists()


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def command_trainer(tmp_path: Path) -> tuple[AblationInputs, dict[str, Any]]:
    """The seed matrix on the command trainer, in a git checkout holding what two of its
    runs read: one searchqa run, one docvqa run."""
    root = tmp_path / "optimiser"
    matrix = with_trainer(load_matrix(str(MATRIX_FILE)), kind="command", root=str(root))
    runs = {r.benchmark: r for r in plan(matrix) if r.benchmark in ("searchqa", "docvqa")}
    for run in runs.values():
        config = effective_config(run, matrix)
        (root / config["env.config"]).parent.mkdir(parents=True, exist_ok=True)
        (root / config["env.config"]).write_text(f"benchmark: {run.benchmark}\n")
        (root / config["env.split_dir"]).mkdir(parents=True, exist_ok=True)
        (root / config["env.split_dir"] / "train.json").write_text("[1, 2]\n")
    (root / "scripts").mkdir()
    (root / "scripts" / "train.py").write_text("print('train')\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "trainer")
    return AblationInputs(
        matrix, str(MATRIX_FILE), evidence.trainer_run_code(), FileDigests(tmp_path / "d.json")
    ), {bench: SimpleNamespace(run_id=run.run_id) for bench, run in runs.items()}


def test_the_command_trainers_checkout_config_and_splits_are_its_evidence(
    tmp_path: Path,
) -> None:
    inputs, runs = command_trainer(tmp_path)
    root = Path(inputs.matrix.trainer.root)
    before = {b: inputs.ablation_identity(w) for b, w in runs.items()}
    evidence_of = inputs.ablation_evidence(runs["searchqa"])
    assert len(evidence_of["trainer_checkout"]["commit"]) == 40

    config = root / "configs" / "searchqa" / "default.yaml"
    config.write_text("benchmark: searchqa\nlr: 2\n")
    after_config = {b: inputs.ablation_identity(w) for b, w in runs.items()}
    assert after_config["searchqa"] != before["searchqa"]
    assert after_config["docvqa"] == before["docvqa"]

    # An uncommitted change to the trainer's code, seen by the next parse of the graph.
    (root / "scripts" / "train.py").write_text("print('train harder')\n")
    reparsed = AblationInputs(inputs.matrix, inputs.matrix_file, inputs.code, inputs.file_digests)
    assert all(reparsed.ablation_identity(w) != after_config[b] for b, w in runs.items())


def test_a_trainer_root_that_is_no_checkout_is_refused_naming_the_key(tmp_path: Path) -> None:
    matrix = with_trainer(load_matrix(str(MATRIX_FILE)), kind="command", root=str(tmp_path))
    with pytest.raises(ConfigError, match=r"trainer\.root") as raised:
        AblationInputs(matrix, str(MATRIX_FILE), {}, FileDigests(tmp_path / "d.json"))
    assert "git checkout" in str(raised.value) and str(MATRIX_FILE) in str(raised.value)


def test_one_identity_keys_the_journal_the_summary_and_the_kept_result(
    small_world: Path, tmp_path: Path
) -> None:
    inputs = run_inputs(small_world)
    resolved = resolve(inputs, evidence.model_run_code())
    assert resolved.fingerprint == identity.digest({"kind": "model run", **resolved.identity.parts})
    assert len(resolved.fingerprint) == identity.DIGEST_LENGTH
    assert len(resolved.identity.parts["code_fingerprint"]) == identity.DIGEST_LENGTH
    results, summary = outputs(tmp_path)
    evaluate(inputs, results, summary, str(tmp_path / "journal"))
    written = json.loads(Path(summary).read_text())
    assert written["fingerprint"] == resolved.fingerprint
    assert {k: written[k] for k in resolved.identity.parts} == dict(resolved.identity.parts)
    assert (tmp_path / "journal" / inputs.run / f"{resolved.fingerprint}.complete").is_dir()


def test_a_trainer_runs_identity_has_the_same_length_and_follows_its_code() -> None:
    first = identity.trainer_run_identity({"skilleval/ablation/run.py": "a"}, {"plan": "p"})
    again = identity.trainer_run_identity({"skilleval/ablation/run.py": "a"}, {"plan": "p"})
    edited = identity.trainer_run_identity({"skilleval/ablation/run.py": "b"}, {"plan": "p"})
    assert first.digest == again.digest != edited.digest
    assert len(first.digest) == identity.DIGEST_LENGTH


def test_where_a_job_runs_is_no_evidence() -> None:
    """The same graph on a cluster's nodes computes what it computes here: a run built on
    one is current on the other (backends.jobs_run_on reaches no identity)."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    here = plan_of(copy.deepcopy(config))
    config["backends"]["jobs_run_on"] = "cluster_nodes"
    there = plan_of(config)
    for name, run in here.runs.items():
        assert there.run_inputs(there.runs[name]).settings() == here.run_inputs(run).settings()
    assert "jobs_run_on" not in there.backends
