"""Every episode's conversation, kept beside a run's results as evidence a reader can open.

A transcript holds the messages of one episode as the rollout loop exchanged them (system,
user, assistant with reasoning and tool calls, tool results), the raw text of a reply whose
tool calls could not be parsed, and how the episode ended. The journal keeps each one with
its episode's record, so a resumed run loses none; the run writes them all, compressed and
in key order, as a declared output. Requests carry the API key in a header only, never in
a message, so no transcript holds it.
"""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from skilleval.errors import SkillevalError
from skilleval.storage import atomic
from skilleval.storage.records import check_version, versioned

TRANSCRIPT_FIELD = "transcript"


def split_record(record: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
    """A journal line as (the task's result record, its episode's messages)."""
    result = {k: v for k, v in record.items() if k != TRANSCRIPT_FIELD}
    return result, record.get(TRANSCRIPT_FIELD)


def write_transcripts(path: str, records: Iterable[dict[str, Any]]) -> None:
    """One versioned line per episode, gzip without a timestamp: the same episodes give
    the same bytes."""
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as handle:
        for record in records:
            result, messages = split_record(record)
            line = versioned(
                "transcript",
                {
                    "task_id": result["task_id"],
                    "repeat": result.get("repeat", 0),
                    "stop_reason": result["stop_reason"],
                    "error": result["error"],
                    "answered": result.get("answered"),
                    "messages": messages,
                },
            )
            handle.write((json.dumps(line, sort_keys=True) + "\n").encode())
    atomic.write_bytes(path, buffer.getvalue())


def read_transcripts(path: str | Path) -> list[dict[str, Any]]:
    if not Path(path).is_file():
        raise SkillevalError(
            f"{path} does not exist: the run has not been built (or was built before "
            "transcripts were kept); build it with snakemake first"
        )
    with gzip.open(path, "rt") as handle:
        lines = [json.loads(line) for line in handle if line.strip()]
    for line in lines:
        check_version("transcript", line, str(path))
    return lines


def find_episode(path: str | Path, task_id: str, repeat: int = 0) -> dict[str, Any]:
    episodes = read_transcripts(path)
    for episode in episodes:
        if episode["task_id"] == task_id and episode["repeat"] == repeat:
            return episode
    known = sorted({e["task_id"] for e in episodes})
    near = [t for t in known if t.startswith(task_id.rsplit("-", 1)[0])][:5] or known[:5]
    raise SkillevalError(
        f"{path} holds no episode of task {task_id!r} repeat {repeat}; its tasks include "
        f"{', '.join(near)} ({len(known)} in all)"
    )


def render(episode: dict[str, Any]) -> str:
    """An episode as a reader wants it: each message under its role, tool calls with their
    arguments, the raw text of what could not be parsed, and how the episode ended."""
    lines = [f"task {episode['task_id']} repeat {episode['repeat']}"]
    answered = episode.get("answered")
    if answered is None:
        lines.append("answered by: not recorded (an episode from before answers were stamped)")
    else:
        replies = ", ".join(answered["reply_models"]) or "none named"
        lines.append(f"answered by: {answered['server']}; replies named: {replies}")
    messages = episode.get("messages")
    if messages is None:
        lines.append("(no transcript was kept for this episode)")
    for message in messages or []:
        role = message.get("role", "?")
        header = f"--- {role}"
        if role == "tool":
            header += f" (result of {message.get('tool_call_id')})"
        lines.append(header)
        if message.get("reasoning_content"):
            lines.append(f"[reasoning] {message['reasoning_content']}")
        if message.get("content"):
            lines.append(str(message["content"]))
        for call in message.get("tool_calls") or []:
            function = call.get("function", {})
            lines.append(f"[tool call {call.get('id')}] {function.get('name')}(")
            lines.append(f"    {function.get('arguments')}")
            lines.append(")")
    end = f"=== ended: {episode['stop_reason']}"
    if episode.get("error"):
        end += f" ({episode['error']})"
    lines.append(end)
    return "\n".join(lines)
