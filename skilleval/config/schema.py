"""Validating config files against their JSON Schemas (shipped as package data).

Every failure is a :class:`ConfigError` naming the file, the key, the bad value and a fix,
so that ``snakemake -n`` can stop with one readable message instead of a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any, TypeVar

import jsonschema
import yaml
from pydantic import BaseModel, ValidationError

from skilleval.errors import ConfigError, ConfigErrors
from skilleval.serving.engines import ENGINES
from skilleval.storage.yamlfile import SafeLoader


@cache
def load_schema(name: str) -> dict[str, Any]:
    """A JSON Schema shipped as package data, so a non-editable install finds it."""
    text = resources.files(__package__).joinpath("schemas", f"{name}.schema.yaml").read_text()
    schema: dict[str, Any] = yaml.load(text, Loader=SafeLoader)
    with_registered_engines(schema)
    return schema


def with_registered_engines(node: Any) -> None:
    """The schema with every ``engine`` key's enum set to the engines serving.engines
    registers: adding an engine is its module, never an edit here."""
    if isinstance(node, dict):
        engine = node.get("properties", {}).get("engine")
        if isinstance(engine, dict) and "enum" in engine:
            engine["enum"] = [None, *ENGINES]
        for value in node.values():
            with_registered_engines(value)
    elif isinstance(node, list):
        for value in node:
            with_registered_engines(value)


def _dotted(path: Any) -> str:
    return ".".join(str(part) for part in path) or "(top level)"


# Protocol keys that moved into its execution section: (section, key) -> their place there.
MOVED_TO_EXECUTION = {
    ("environment", "url"): "environment.url",
    ("environment", "beside_run"): "environment.beside_run",
    **{
        ("model_server", key): f"model_server.{key}"
        for key in ("base_url", "api_key_env", "request_timeout_s", "launch")
    },
    ("runtime", "outage_budget_s"): "outage_budget_s",
}

# A file with many bad values names this many, then how many more there are.
MOST_REPORTED = 10


def validate_against_schema(data: Mapping[str, Any], schema_name: str, source: object) -> None:
    """Raise ConfigError naming every schema violation at once, the most specific one per
    key (at most MOST_REPORTED, then a count)."""
    validator = jsonschema.Draft202012Validator(load_schema(schema_name))
    by_key: dict[tuple[Any, ...], Any] = {}
    for error in validator.iter_errors(data):
        best = jsonschema.exceptions.best_match([error])
        by_key.setdefault(tuple(best.absolute_path), best)
    found = [_config_error(by_key[k], source) for k in sorted(by_key, key=lambda k: (len(k), k))]
    if len(found) == 1:
        raise found[0]
    if found:
        raise ConfigErrors(found, MOST_REPORTED)


def _config_error(error: Any, source: object) -> ConfigError:
    """One violation (a jsonschema ValidationError) as a ConfigError in the user's words."""
    key = _dotted(error.absolute_path)
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = [k for k in error.instance if k not in allowed]
        path = list(error.absolute_path)
        moved = MOVED_TO_EXECUTION.get((path[2], extra[0])) if len(path) == 3 else None
        if path[:1] == ["protocols"] and moved:
            return ConfigError(
                source,
                f"{key}.{extra[0]}",
                error.instance[extra[0]],
                "moved: a setting that cannot change a result is in the execution section",
                f"write it as protocols.{path[1]}.execution.{moved}",
            )
        return ConfigError(
            source,
            f"{key}.{extra[0]}" if key != "(top level)" else extra[0],
            error.instance[extra[0]],
            "unknown key",
            f"remove it or use one of: {', '.join(allowed)}",
        )
    if error.validator == "required":
        return ConfigError(source, key, "(missing)", error.message, "add the missing key")
    description = error.schema.get("description", "") if isinstance(error.schema, dict) else ""
    fix = plain_rule(str(error.validator), error.validator_value)
    if description:
        fix += f" ({description.rstrip('.')})"
    return ConfigError(source, key, error.instance, error.message, fix)


TYPE_WORDS = {
    "integer": "a whole number",
    "number": "a number",
    "string": "text",
    "boolean": "true or false",
    "null": "null",
    "array": "a list",
    "object": "a mapping",
}


def plain_rule(validator: str, value: Any) -> str:
    """What a schema rule asks for, in words rather than JSON Schema keywords."""
    if validator == "type":
        types = value if isinstance(value, list) else [value]
        return "use " + " or ".join(TYPE_WORDS.get(str(t), str(t)) for t in types)
    words = {
        "minimum": f"use a value of at least {value}",
        "maximum": f"use a value of at most {value}",
        "exclusiveMinimum": f"use a value greater than {value}",
        "exclusiveMaximum": f"use a value less than {value}",
        "minItems": f"give at least {value} item(s)",
        "minProperties": f"give at least {value} entries",
        "maxItems": f"give at most {value} item(s)",
        "minLength": f"give at least {value} character(s)",
        "uniqueItems": "list every item once",
        "pattern": f"use a value matching the regular expression {value}",
        "const": f"use {value!r}",
    }
    if validator == "enum":
        return "use one of: " + ", ".join(str(v) for v in value)
    return words.get(validator, f"follow the rule {validator} = {value!r}")


Model = TypeVar("Model", bound=BaseModel)


def as_typed(model: type[Model], data: Mapping[str, Any], source: object) -> Model:
    """``data``, which passed its schema, as ``model``'s typed values. A value the schema
    cannot word but the model refuses (a mapping key of the wrong type) is a ConfigError
    like a schema violation, never a traceback."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        found = [
            ConfigError(
                source,
                _dotted(part for part in problem["loc"] if part != "[key]"),
                problem["input"],
                problem["msg"],
                "write the value as docs/configuration.md describes",
            )
            for problem in error.errors()
        ]
        raise (found[0] if len(found) == 1 else ConfigErrors(found, MOST_REPORTED)) from None
