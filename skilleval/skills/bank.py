"""Skill banks: reading markdown chunk files or selected_skillbank.json, hashing, injecting.

A markdown bank is a sequence of ``## chunk <id>`` sections. A chunk may carry
machine-readable hints as HTML comments (``<!-- skilleval:hint {...} -->``): invisible to
a real model's reading of the markdown, read by the sim policy.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skilleval.errors import BankError
from skilleval.storage.hashing import canonical_hash

CHUNK_HEADER = re.compile(r"^## chunk (?P<id>\S+)\s*$", re.MULTILINE)
HINT = re.compile(r"<!-- skilleval:hint (?P<json>\{.*?\}) -->")


@dataclass(frozen=True)
class Skill:
    """One chunk of a skill bank."""

    chunk_id: str
    text: str
    hints: tuple[dict[str, Any], ...] = field(default=())


def parse_hints(text: str) -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(match.group("json")) for match in HINT.finditer(text))


def parse_markdown_bank(text: str, source: str) -> list[Skill]:
    headers = list(CHUNK_HEADER.finditer(text))
    if not headers:
        raise BankError(f"{source}: no '## chunk <id>' sections found")
    skills = []
    for header, following in zip(headers, [*headers[1:], None], strict=True):
        end = following.start() if following else len(text)
        body = text[header.end() : end].strip()
        skills.append(Skill(chunk_id=header.group("id"), text=body, hints=parse_hints(body)))
    return skills


def parse_json_bank(data: Any, source: str) -> list[Skill]:
    items = data.get("skills", data.get("chunks")) if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise BankError(f"{source}: expected a list of chunks or a 'skills'/'chunks' list")
    skills = []
    for i, item in enumerate(items):
        text = item.get("content", item.get("text")) if isinstance(item, dict) else None
        if not isinstance(text, str):
            raise BankError(f"{source}: chunk {i} has no 'content' or 'text' string")
        chunk_id = str(item.get("id", item.get("chunk_id", f"{i:02d}")))
        skills.append(Skill(chunk_id=chunk_id, text=text, hints=parse_hints(text)))
    return skills


def load_bank(path: str | Path, expected_chunks: int | None = None) -> list[Skill]:
    path = Path(path)
    if path.suffix == ".json":
        skills = parse_json_bank(json.loads(path.read_text()), str(path))
    else:
        skills = parse_markdown_bank(path.read_text(), str(path))
    ids = [s.chunk_id for s in skills]
    if len(set(ids)) != len(ids):
        raise BankError(
            f"{path}: duplicate chunk ids {sorted({i for i in ids if ids.count(i) > 1})}"
        )
    if expected_chunks is not None and len(skills) != expected_chunks:
        raise BankError(
            f"{path}: holds {len(skills)} chunks but the registry declares {expected_chunks}; "
            "fix the bank file or the 'chunks' entry of the bank in config"
        )
    return skills


def render_markdown_bank(title: str, skills: Sequence[Skill]) -> str:
    sections = [f"# {title}\n"]
    for skill in skills:
        sections.append(f"## chunk {skill.chunk_id}\n\n{skill.text}\n")
    return "\n".join(sections)


def bank_hash(skills: Sequence[Skill]) -> str:
    canonical = json.dumps([[s.chunk_id, s.text] for s in skills], separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class Prompt:
    """The system message of a run, from its protocol's two files (``protocol.prompt``):
    the system prompt (the file's text without its final newline) and the skill-injection
    template (jinja2, given ``system`` and ``skills``). A run without skills sends the
    system prompt alone."""

    system: str
    skill_template: str
    template_file: str = ""

    @classmethod
    def load(cls, system_file: str, skill_template_file: str) -> Prompt:
        try:
            system = Path(system_file).read_text().removesuffix("\n")
            template = Path(skill_template_file).read_text()
        except OSError as error:
            raise BankError(f"cannot read a prompt file of the protocol: {error}") from None
        return cls(system, template, skill_template_file)

    @property
    def digest(self) -> str:
        """Identity of the two files' contents (the run's prompt_hash)."""
        return canonical_hash([self.system, self.skill_template])[:16]

    @functools.cached_property
    def _template(self) -> Any:
        import jinja2

        try:
            environment = jinja2.Environment(undefined=jinja2.StrictUndefined)
            return environment.from_string(self.skill_template)
        except jinja2.TemplateError as error:
            raise self._refused(error) from None

    def _refused(self, error: Exception) -> BankError:
        return BankError(
            f"{self.template_file or 'skill template'}: {error}; fix the template "
            "(variables: system, skills with chunk_id and text)"
        )

    def message(self, skills: Sequence[Skill]) -> str:
        if not skills:
            return self.system
        import jinja2

        try:
            return str(self._template.render(system=self.system, skills=skills))
        except jinja2.TemplateError as error:
            raise self._refused(error) from None
