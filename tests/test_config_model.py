"""The typed config (skilleval/config/model.py) and ablation matrix (config/matrix.py) and
the JSON schemas that check their files describe the same keys: neither can gain, drop or
loosen a key alone. A shipped file becomes typed values and gives back the mapping it was
written as, which is what params and identities hash."""

from __future__ import annotations

import types
import typing
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from skilleval.config.checks import validate_config
from skilleval.config.loading import merged_config, read_mapping
from skilleval.config.matrix import Matrix
from skilleval.config.model import Config
from skilleval.config.schema import load_schema
from skilleval.errors import ConfigError
from skilleval.serving.engines import ENGINES
from tests.conftest import REPO, load_default_config

SCHEMA = load_schema("config")
MATRIX_SCHEMA = load_schema("ablation")
SCHEMAS = REPO / "skilleval" / "config" / "schemas"


def resolved(node: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    return schema["$defs"][ref.removeprefix("#/$defs/")] if ref else node


def inner(annotation: Any) -> tuple[str, type[BaseModel]] | None:
    """('model' | 'list' | 'map', the model) where a field holds models, else None."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "model", annotation
    if origin in (typing.Union, types.UnionType):
        found = [inner(a) for a in args if a is not type(None)]
        return next((f for f in found if f), None)
    if origin is list and (item := inner(args[0])):
        return "list", item[1]
    if origin is dict and (value := inner(args[1])):
        return "map", value[1]
    return None


def mismatches(
    model: type[BaseModel], node: dict[str, Any], where: str, schema: dict[str, Any] = SCHEMA
) -> list[str]:
    """Where ``model`` and the schema ``node`` differ: keys, required keys, and below."""
    node = resolved(node, schema)
    fields, properties = model.model_fields, node.get("properties", {})
    found = []
    if set(fields) != set(properties):
        found.append(f"{where}: model {sorted(fields)} != schema {sorted(properties)}")
    required = {name for name, field in fields.items() if field.is_required()}
    if required != set(node.get("required", [])):
        found.append(f"{where}: required {sorted(required)} != {sorted(node.get('required', []))}")
    for name, field in fields.items():
        shape = inner(field.annotation)
        if shape is None or name not in properties:
            continue
        kind, child = shape
        below = resolved(properties[name], schema)
        below = {"list": below.get("items"), "map": below.get("additionalProperties")}.get(
            kind, below
        )
        found += mismatches(child, below, f"{where}.{name}", schema)
    return found


def test_the_models_and_the_schema_have_the_same_keys() -> None:
    assert mismatches(Config, SCHEMA, "config") == []
    assert mismatches(Matrix, MATRIX_SCHEMA, "matrix", MATRIX_SCHEMA) == []


def test_the_check_sees_a_key_the_schema_lacks() -> None:
    class Wider(Config):
        extra_section: int

    assert mismatches(Wider, SCHEMA, "config") == [
        "config: model "
        + str(sorted([*Config.model_fields, "extra_section"]))
        + " != schema "
        + str(sorted(SCHEMA["properties"])),
        "config: required "
        + str(sorted([*SCHEMA["required"], "extra_section"]))
        + " != "
        + str(sorted(SCHEMA["required"])),
    ]


@pytest.mark.parametrize(
    "files",
    [("config/config.yaml",), ("config/config.yaml", "tests/data/small.yaml")],
    ids=["default", "small"],
)
def test_a_shipped_config_gives_back_the_mapping_it_was_written_as(
    files: tuple[str, ...],
) -> None:
    config = merged_config(REPO / f for f in files)
    typed = Config.model_validate(config)
    assert typed.settings() == config
    assert typed.statistics.n_resamples == config["statistics"]["n_resamples"]


def test_the_seed_matrix_gives_back_the_mapping_it_was_written_as() -> None:
    written = read_mapping(REPO / "config" / "ablation" / "matrix.yaml", "matrix", "m").data
    typed = Matrix.model_validate(written)
    assert typed.settings() == written
    assert typed.trainer.kind == written["trainer"]["kind"]


def engine_enums(node: Any) -> list[list[Any]]:
    if isinstance(node, dict):
        found = [node["engine"]["enum"]] if "enum" in node.get("engine", {}) else []
        return found + [e for value in node.values() for e in engine_enums(value)]
    return [e for value in node for e in engine_enums(value)] if isinstance(node, list) else []


def test_the_schema_s_engines_are_the_registry_s() -> None:
    """An engine is one module of serving/engines: the schema a config is checked against
    lists the registry's engines, and the file lists none of its own to drift."""
    (in_schema,) = engine_enums(load_schema("config"))
    assert in_schema == [None, *ENGINES]
    assert {"sglang", "vllm", "llama-cpp-python", "llama.cpp", "openai"} <= set(ENGINES)
    (written,) = engine_enums(yaml.safe_load((SCHEMAS / "config.schema.yaml").read_text()))
    assert written == [None]


def test_an_engine_no_module_registers_is_refused_naming_the_key() -> None:
    config = load_default_config()
    config["protocols"]["local-sglang"]["model_server"]["engine"] = "tgi"
    with pytest.raises(ConfigError) as refused:
        validate_config(config, "config/config.yaml")
    said = str(refused.value)
    assert "protocols.local-sglang.model_server.engine" in said and "'tgi'" in said
