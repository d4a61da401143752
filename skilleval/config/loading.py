"""Reading the YAML files the project is configured by: the config, its overlays and the
ablation matrix, all through one path.

A missing file, a syntax error (with line, column and the offending line) and a key given
twice are refused before any work. The line of every key is kept, so that a later error
names the file and line holding the bad value, even when overlays were merged over the
main config (the file that set the value last is the one named).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from skilleval.errors import ConfigError, YamlSyntaxError
from skilleval.storage.yamlfile import SafeLoader

KeyPath = tuple[str, ...]


@dataclass(frozen=True)
class YamlFile:
    path: str
    data: Any
    lines: dict[KeyPath, int]


def _key_lines(node: yaml.Node, prefix: KeyPath, lines: dict[KeyPath, int], file: str) -> None:
    """Each key path's line; a key given twice in one mapping is refused with its full path."""
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            path = (*prefix, str(key_node.value))
            line = key_node.start_mark.line + 1
            if path in lines and key_node.value != "<<":
                raise ConfigError(
                    file,
                    ".".join(path),
                    f"lines {lines[path]} and {line}",
                    "key given twice in one mapping (YAML would silently keep the last)",
                    "keep one of the two entries",
                )
            lines[path] = line
            _key_lines(value_node, path, lines, file)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            path = (*prefix, str(index))
            lines[path] = item.start_mark.line + 1
            _key_lines(item, path, lines, file)


def _syntax_error(path: str, text: str, error: yaml.MarkedYAMLError) -> YamlSyntaxError:
    # For a key without its colon or an unclosed quote, the context mark is where the bad
    # token began; the problem mark is only where the scanner gave up, often a line on.
    scanning = error.context in ("while scanning a simple key", "while scanning a quoted scalar")
    mark = (error.context_mark if scanning else None) or error.problem_mark or error.context_mark
    line = mark.line + 1 if mark else 0
    column = mark.column + 1 if mark else 0
    source_line = text.splitlines()[line - 1] if 0 < line <= len(text.splitlines()) else ""
    problem = str(error.problem or "")
    if scanning and error.problem_mark is not None and error.context_mark is not None:
        problem += f" ({error.context}; the scanner stopped at line {error.problem_mark.line + 1})"
    elif error.context and error.context_mark is not None:
        problem += f" ({error.context} at line {error.context_mark.line + 1})"
    fix = (
        "indent with spaces: YAML does not allow tabs"
        if "\t" in source_line[: max(column, 1)] or "'\\t'" in problem
        else "correct the YAML at that place (a missing colon, quote or closing bracket is "
        "the usual cause)"
    )
    return YamlSyntaxError(path, line, column, source_line, problem, fix)


def read_yaml(path: str | Path, what: str = "config file", key: str = "(file)") -> YamlFile:
    """One YAML file, refused with a clear error if it is missing or malformed."""
    name = str(path)
    if not Path(path).is_file():
        raise ConfigError(
            name,
            key,
            name,
            f"{what} not found",
            "create it, or give the path of an existing file (relative paths start at the "
            "workflow directory)",
        )
    text = Path(path).read_text()
    loader = SafeLoader(text)
    lines: dict[KeyPath, int] = {}
    try:
        node = loader.get_single_node()
        if node is not None:
            _key_lines(node, (), lines, name)
        data = loader.construct_document(node) if node is not None else None
    except ConfigError as error:  # a key given twice, raised with the stream's name
        raise ConfigError(name, error.key, error.value, error.problem, error.fix) from None
    except yaml.MarkedYAMLError as error:
        raise _syntax_error(name, text, error) from None
    finally:
        loader.dispose()
    return YamlFile(name, data, lines)


def read_mapping(path: str | Path, what: str = "config file", key: str = "(file)") -> YamlFile:
    loaded = read_yaml(path, what, key)
    if not isinstance(loaded.data, dict):
        raise ConfigError(
            loaded.path, "(top level)", loaded.data, "not a mapping", "write a YAML mapping"
        )
    return loaded


def load_config_file(path: str | Path) -> dict[str, Any]:
    data: dict[str, Any] = read_mapping(path).data
    return data


class ConfigSources:
    """The files a merged config came from, answering where each key's value is set."""

    def __init__(self, files: Iterable[YamlFile]) -> None:
        self.files = list(files)

    def where(self, key: str) -> str:
        """'file, line N' of the file that set ``key`` last; its closest set parent if none
        set it (a missing key), or every file when nothing matches."""
        parts = tuple(key.split("."))
        for loaded in reversed(self.files):
            if parts in loaded.lines:
                return f"{loaded.path}, line {loaded.lines[parts]}"
        for depth in range(len(parts) - 1, 0, -1):
            for loaded in reversed(self.files):
                if parts[:depth] in loaded.lines:
                    return f"{loaded.path}, line {loaded.lines[parts[:depth]]}"
        return ", ".join(loaded.path for loaded in self.files) or "config"

    def merged(self) -> dict[str, Any]:
        """The files merged as Snakemake merges config files, in their order; the files'
        own values are left as read."""
        config: dict[str, Any] = {}
        for loaded in self.files:
            merge(config, copy.deepcopy(loaded.data))
        return config


def merge(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """Snakemake's merge of config files: mappings merged key by key, anything else replaced."""
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = value
    return base


def config_sources(configfiles: Iterable[str | Path]) -> ConfigSources:
    """Every config file read and checked (syntax, duplicate keys), in merge order."""
    return ConfigSources(read_mapping(path) for path in configfiles)


def in_declared_order(config: Mapping[str, Any], sources: ConfigSources) -> dict[str, Any]:
    """``config`` with every mapping's keys in the order the files declare them, the
    default config's first and each overlay's new keys after: Snakemake starts its config
    from the overlays and merges the default into it, so an overlay's keys would lead (and
    its new runs and contrasts head every table). Keys no file declares (--config) follow."""
    ordered: dict[str, Any] = _ordered(config, sources.merged())
    return ordered


def _ordered(value: Any, declared: Any) -> Any:
    if not isinstance(value, Mapping):
        return value
    order = list(declared) if isinstance(declared, Mapping) else []
    keys = [k for k in order if k in value] + [k for k in value if k not in order]
    below = declared if isinstance(declared, Mapping) else {}
    return {k: _ordered(value[k], below.get(k)) for k in keys}


def merged_config(configfiles: Iterable[str | Path]) -> dict[str, Any]:
    return config_sources(configfiles).merged()
