"""A run's evidence identity, defined once.

The identity of a model run or a trainer run is a digest of everything its result depends
on, and of nothing else: the contents of what it reads (never a path), the protocol's
values that reach evidence (never an address or a timeout), and the code that computes
it (provenance.evidence). It keys the run's journal and its kept complete result; the
graph's params, the kept-result lookup of ``skilleval stale`` and the runs themselves all
take it from here, with one digest length.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from skilleval.storage.hashing import canonical_hash

# Hex digits of every identity digest: 96 bits, no collision among any lab's runs.
DIGEST_LENGTH = 24

RunKind = Literal["model run", "trainer run"]


@dataclass(frozen=True)
class EvidenceIdentity:
    """What a run's result depends on (``parts``, recorded in its summary and journal),
    and their digest, the key of its journal and kept result."""

    kind: RunKind
    parts: Mapping[str, Any]

    @property
    def digest(self) -> str:
        return digest({"kind": self.kind, **self.parts})


def digest(value: Any) -> str:
    """The identity digest of a JSON-able value."""
    return canonical_hash(value)[:DIGEST_LENGTH]


def model_run_identity(
    *,
    protocol: str,
    protocol_digest: str,
    checkpoint_id: str,
    checkpoint_fingerprint: str,
    bank: str | None,
    bank_hash: str | None,
    split: str,
    split_hash: str,
    prompt_hash: str,
    backends: Mapping[str, str],
    sim_policy_version: int | None,
    code: Mapping[str, str],
    mask_hash: str | None = None,
) -> EvidenceIdentity:
    """A model run's identity: what its per-task results depend on. ``mask_hash``: the
    system prompt of each task of a masked (Gate A) run."""
    parts: dict[str, Any] = {
        "protocol": protocol,
        "protocol_fingerprint": protocol_digest,
        "checkpoint_id": checkpoint_id,
        "checkpoint_fingerprint": checkpoint_fingerprint,
        "bank": bank,
        "bank_hash": bank_hash,
        "split": split,
        "split_hash": split_hash,
        "prompt_hash": prompt_hash,
        "backends": dict(sorted(backends.items())),
        # Journals of the sim policy are only valid for the behaviour they were made with.
        "sim_policy_version": sim_policy_version,
        "code_fingerprint": digest(dict(code)),
    }
    if mask_hash is not None:
        parts["mask_hash"] = mask_hash
    return EvidenceIdentity("model run", parts)


def trainer_run_identity(code: Mapping[str, str], evidence: Mapping[str, Any]) -> EvidenceIdentity:
    """A trainer (ablation) run's identity: skilleval's code of the run and what the
    trainer reads (its effective config; for the command trainer, its checkout, the
    benchmark config and split folder)."""
    return EvidenceIdentity("trainer run", {"code_fingerprint": digest(dict(code)), **evidence})
