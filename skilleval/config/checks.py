"""Cross-field rules of the experiment config that JSON Schema cannot express.

References between sections, uniqueness and capacity: each failure is a ConfigError
naming the key, the bad value and the fix.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from skilleval.config.model import Config
from skilleval.config.schema import MOST_REPORTED, as_typed, validate_against_schema
from skilleval.env.adapters import BUILT_IN, AdapterNotFound, find_adapter
from skilleval.errors import ConfigError, ConfigErrors
from skilleval.skills.bank import load_bank
from skilleval.world.design import world_bank_chunk_ids


def _check_reference(
    source: object, key: str, value: object, registry: Mapping[str, Any], what: str
) -> None:
    if value not in registry:
        raise ConfigError(
            source,
            key,
            value,
            f"not a registered {what}",
            f"use one of {', '.join(sorted(registry))} or register it under {what}s",
        )


def check_cross_fields(config: Mapping[str, Any], source: object) -> None:
    """Rules JSON Schema cannot express: references, uniqueness, capacity, confinement."""
    check_world_dir(config, source)
    check_environment_adapter(config, source)
    check_protocols(config, source)
    check_runs(config, source)
    check_contrasts(config, source)
    check_ranking(config, source)
    check_registered_banks(config, source)
    check_checkpoint_ids(config, source)


def check_environment_adapter(config: Mapping[str, Any], source: object) -> None:
    """A lab's environment adapter is found (not run) before any job: an unknown name or
    a package missing from this venv is refused with the adapters installed."""
    name = config["backends"]["environment"]
    if name in BUILT_IN:
        return
    try:
        find_adapter(name)
    except AdapterNotFound as error:
        raise ConfigError(source, "backends.environment", name, error.why, error.fix) from None


def check_protocols(config: Mapping[str, Any], source: object) -> None:
    for name, protocol in config["protocols"].items():
        runtime, env = protocol["runtime"], protocol["environment"]
        if runtime["concurrency"] > env["slots"]:
            raise ConfigError(
                source,
                f"protocols.{name}.runtime.concurrency",
                runtime["concurrency"],
                f"more concurrent episodes than the environment has slots ({env['slots']})",
                f"lower concurrency to at most {env['slots']}",
            )
        if any(run["protocol"] == name for run in config["runs"].values()):
            execution = protocol["execution"]
            check_reachable_environment(config, source, name, execution["environment"])
            check_reachable_model_server(config, source, name, execution["model_server"])
        metrics = protocol["metrics"]
        if metrics["main"] not in ("reward", "r_strict"):
            raise ConfigError(
                source,
                f"protocols.{name}.metrics.main",
                metrics["main"],
                "the memo's main metric is reward (= r_strict)",
                "set main: reward",
            )


def is_loopback(url: str) -> bool:
    host = urlparse(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_reachable_environment(
    config: Mapping[str, Any], source: object, name: str, env: Mapping[str, Any]
) -> None:
    """A job on a cluster node reaches a loopback address on that node, not here."""
    backends = config["backends"]
    if (
        backends.get("jobs_run_on", "this_host") == "cluster_nodes"
        and backends["environment"] != "shopsim"
        and is_loopback(env["url"])
        and not env.get("beside_run", False)
    ):
        raise ConfigError(
            source,
            f"protocols.{name}.execution.environment.url",
            env["url"],
            "a loopback address, but jobs run on cluster nodes (backends.jobs_run_on: "
            "cluster_nodes), where it is each node's own loopback",
            "give the environment server's routable address (http://<host>:<port>), or, "
            "when the run's launched server command also serves the environment on the "
            "job's node, set execution.environment.beside_run: true",
        )


def check_reachable_model_server(
    config: Mapping[str, Any], source: object, name: str, server: Mapping[str, Any]
) -> None:
    """A server the runs only connect to (model_server: external) must be reachable from
    every node a job may land on; one a job launches is on its own node."""
    backends = config["backends"]
    if (
        backends.get("jobs_run_on", "this_host") == "cluster_nodes"
        and backends["model_server"] == "external"
        and is_loopback(server["base_url"])
    ):
        raise ConfigError(
            source,
            f"protocols.{name}.execution.model_server.base_url",
            server["base_url"],
            "a loopback address, but jobs run on cluster nodes (backends.jobs_run_on: "
            "cluster_nodes), where it is each node's own loopback and no server listens",
            "give the model server's routable address (http://<host>:<port>/v1), or let "
            "each run's job launch its own (backends.model_server: process)",
        )


def check_runs(config: Mapping[str, Any], source: object) -> None:
    for run_name, run in config["runs"].items():
        prefix = f"runs.{run_name}"
        _check_reference(
            source, f"{prefix}.protocol", run["protocol"], config["protocols"], "protocol"
        )
        _check_reference(
            source, f"{prefix}.checkpoint", run["checkpoint"], config["checkpoints"], "checkpoint"
        )
        if run["bank"] is not None:
            _check_reference(source, f"{prefix}.bank", run["bank"], config["banks"], "bank")
    _check_unique(
        source, config["runs"], "runs", "experiment", "give every run its own experiment name"
    )


def check_contrasts(config: Mapping[str, Any], source: object) -> None:
    """Every contrast's runs exist, differ and share split and protocol; all the broken
    contrasts are reported at once."""
    found: list[ConfigError] = []
    for name, contrast in config["contrasts"].items():
        try:
            check_contrast(config, source, name, contrast)
        except ConfigError as error:
            found.append(error)
    if found:
        raise found[0] if len(found) == 1 else ConfigErrors(found, MOST_REPORTED)


def check_contrast(
    config: Mapping[str, Any], source: object, name: str, contrast: Mapping[str, Any]
) -> None:
    for role in ("control", "treatment"):
        _check_reference(source, f"contrasts.{name}.{role}", contrast[role], config["runs"], "run")
    if contrast["control"] == contrast["treatment"]:
        raise ConfigError(
            source,
            f"contrasts.{name}.treatment",
            contrast["treatment"],
            "a run cannot be contrasted with itself",
            "name two different runs",
        )
    runs = [config["runs"][contrast[r]] for r in ("control", "treatment")]
    splits = sorted({run_split(config, run) for run in runs})
    if len(splits) > 1:
        raise ConfigError(
            source,
            f"contrasts.{name}.treatment",
            contrast["treatment"],
            f"the two runs evaluate different splits ({', '.join(splits)}): a paired "
            "contrast needs the same tasks",
            "contrast two runs of one split (set runs.*.split alike)",
        )
    protocols = {run["protocol"] for run in runs}
    if len(protocols) > 1:
        raise ConfigError(
            source,
            f"contrasts.{name}",
            sorted(protocols),
            "the two runs use different protocols; their numbers must never be mixed",
            "contrast runs of one protocol only",
        )


def run_split(config: Mapping[str, Any], run: Mapping[str, Any]) -> str:
    """The split a run evaluates: its own, or its protocol's."""
    return str(run.get("split") or config["protocols"][run["protocol"]]["tasks"]["split"])


def check_world_dir(config: Mapping[str, Any], source: object) -> None:
    """The world is written, so its folder must lie inside the workflow directory."""
    world_dir = str(config["world"]["dir"])
    normal = os.path.normpath(world_dir)
    if os.path.isabs(world_dir) or normal == ".." or normal.startswith(".." + os.sep):
        raise ConfigError(
            source,
            "world.dir",
            world_dir,
            "lies outside the workflow directory, but the workflow writes the world there",
            "use a relative path inside the workflow directory, such as results/world",
        )
    if normal == ".":
        raise ConfigError(
            source,
            "world.dir",
            world_dir,
            "is the workflow directory itself",
            "use a folder of its own, such as results/world",
        )


def check_checkpoint_ids(config: Mapping[str, Any], source: object) -> None:
    _check_unique(
        source,
        config["checkpoints"],
        "checkpoints",
        "checkpoint_id",
        "changing weights must change checkpoint_id",
    )


def _check_unique(
    source: object, entries: Mapping[str, Any], section: str, field: str, fix: str
) -> None:
    """No two entries of a config section share a value of ``field``."""
    owner: dict[Any, str] = {}
    for name, entry in entries.items():
        value = entry[field]
        if value in owner:
            raise ConfigError(
                source,
                f"{section}.{name}.{field}",
                value,
                f"already the {field} of {section}.{owner[value]}",
                fix,
            )
        owner[value] = name


def check_ranking(config: Mapping[str, Any], source: object) -> None:
    ranking = config["ranking"]
    _check_reference(source, "ranking.bank", ranking["bank"], config["banks"], "bank")
    bank = config["banks"][ranking["bank"]]
    if bank["role"] != "ranking":
        raise ConfigError(
            source,
            "ranking.bank",
            ranking["bank"],
            f"has role {bank['role']!r}, not 'ranking'",
            "rank the draft bank (role: ranking)",
        )
    if ranking["k"] > bank["chunks"]:
        raise ConfigError(
            source,
            "ranking.k",
            ranking["k"],
            f"more than the {bank['chunks']} chunks of {ranking['bank']}",
            f"choose k <= {bank['chunks']}",
        )
    for key, split in (("bare_val_run", "val"), ("bare_test_run", "test")):
        run_name = ranking[key]
        _check_reference(source, f"ranking.{key}", run_name, config["runs"], "run")
        run = config["runs"][run_name]
        run_split = run.get("split", config["protocols"][run["protocol"]]["tasks"]["split"])
        if run_split != split or run["bank"] is not None:
            raise ConfigError(
                source,
                f"ranking.{key}",
                run_name,
                f"must be a skill-free run on the {split} split "
                f"(it has bank {run['bank']!r}, split {run_split!r})",
                f"declare a run with bank: null and split: {split}",
            )
    val, test = (config["runs"][ranking[k]] for k in ("bare_val_run", "bare_test_run"))
    if (val["checkpoint"], val["protocol"]) != (test["checkpoint"], test["protocol"]):
        raise ConfigError(
            source,
            "ranking.bare_val_run",
            ranking["bare_val_run"],
            "uses another checkpoint or protocol than bare_test_run",
            "fit and evaluate the ranking on one checkpoint and protocol",
        )
    extra = sorted(set(ranking["random_seeds_in_paper"]) - set(ranking["random_seeds"]))
    if extra:
        raise ConfigError(
            source,
            "ranking.random_seeds_in_paper",
            extra,
            "not among the declared random_seeds",
            "declare every seed under ranking.random_seeds first",
        )
    if ranking["experiment_b"]["design_seed"] == ranking["design_seed"]:
        raise ConfigError(
            source,
            "ranking.experiment_b.design_seed",
            ranking["design_seed"],
            "reuses the gate's masks",
            "experiment B needs fresh masks: choose another seed",
        )


def ranking_bank_chunk_ids(config: Mapping[str, Any], source: object) -> list[str]:
    """The chunk ids of the ranking bank, before anything is built: those the world will
    write there, or those of the user's bank file (which must then exist)."""
    name = config["ranking"]["bank"]
    bank = config["banks"][name]
    world_ids = world_bank_chunk_ids(config, bank["path"], bank["chunks"])
    if world_ids is not None:
        return world_ids
    if not Path(bank["path"]).is_file():
        raise ConfigError(
            source,
            f"banks.{name}.path",
            bank["path"],
            "does not exist, so the registered Random-K banks cannot be checked against it",
            "point it at the draft bank file",
        )
    return [skill.chunk_id for skill in load_bank(bank["path"])]


def check_registered_banks(config: Mapping[str, Any], source: object) -> None:
    """A registered Random-K bank names k distinct chunks of the ranking bank, for a
    declared seed, once."""
    ranking = config["ranking"]
    entries = ranking.get("registered_random_banks", [])
    if not entries:
        return
    draft = ranking_bank_chunk_ids(config, source)
    seen: set[int] = set()
    for i, entry in enumerate(entries):
        key = f"ranking.registered_random_banks[{i}]"
        if entry["seed"] not in ranking["random_seeds"] or entry["seed"] in seen:
            raise ConfigError(
                source,
                f"{key}.seed",
                entry["seed"],
                "not one of ranking.random_seeds"
                if entry["seed"] not in ranking["random_seeds"]
                else "registered twice",
                "register one bank per seed of ranking.random_seeds",
            )
        seen.add(entry["seed"])
        unknown = [c for c in entry["chunk_ids"] if c not in draft]
        if unknown:
            raise ConfigError(
                source,
                f"{key}.chunk_ids",
                unknown[0],
                f"not a chunk of the ranking bank {ranking['bank']}",
                f"use ids of {ranking['bank']}: {', '.join(draft)}",
            )
        if len(entry["chunk_ids"]) != ranking["k"]:
            raise ConfigError(
                source,
                f"{key}.chunk_ids",
                entry["chunk_ids"],
                f"{len(entry['chunk_ids'])} chunks, but ranking.k is {ranking['k']}",
                f"list exactly {ranking['k']} chunk ids",
            )


def validate_config(config: Mapping[str, Any], source: object) -> Config:
    """The config checked against its schema and across fields, as typed values."""
    validate_against_schema(config, "config", source)
    check_cross_fields(config, source)
    return as_typed(Config, config, source)
