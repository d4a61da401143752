"""The YAML loader of every file the project reads: safe, fast, and strict about keys.

libyaml's loader is used when PyYAML was built with it: the workflow parses its config
and the ablation matrix on every Snakemake start. A key given twice in one mapping is an
error naming the key and both lines, never "the last one silently wins".
"""

from __future__ import annotations

from typing import Any

import yaml

from skilleval.errors import ConfigError

_FastLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class SafeLoader(_FastLoader):  # type: ignore[misc,valid-type]
    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in first_line and key != "<<":
                raise ConfigError(
                    key_node.start_mark.name,
                    str(key),
                    f"lines {first_line[key]} and {line}",
                    "key given twice in one mapping (YAML would silently keep the last)",
                    "keep one of the two entries",
                )
            first_line[key] = line
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping
