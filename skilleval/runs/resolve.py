"""Resolving a run's inputs once: files read, hashed and turned into what the loop needs.

The run's evidence identity (provenance.identity) is computed here from what was read;
the journal is keyed by its digest. Nothing after this step reads the run's input files
again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from skilleval.checkpoints.files import checkpoint_fingerprint
from skilleval.errors import SkillevalError
from skilleval.provenance.identity import EvidenceIdentity, model_run_identity
from skilleval.runs.inputs import RunInputs, protocol_digest
from skilleval.runs.journal import RecordKey
from skilleval.runs.tasks import load_task_ids
from skilleval.skills.bank import Prompt, Skill, bank_hash, load_bank
from skilleval.storage.hashing import canonical_hash, file_sha256
from skilleval.world.sim_policy import SIM_POLICY_VERSION


@dataclass(frozen=True)
class ResolvedRun:
    identity: EvidenceIdentity
    keys: list[RecordKey]
    prompts: dict[str, str]
    chunk_hashes: dict[str, str]

    @property
    def fingerprint(self) -> str:
        """The identity's digest: the key of the run's journal and kept result."""
        return self.identity.digest


def checked_checkpoint(inputs: RunInputs) -> str:
    """The weights' fingerprint, refused when the registry pinned another one."""
    fingerprint = checkpoint_fingerprint(inputs.checkpoint_path)
    expected = inputs.checkpoint_expected_fingerprint
    if expected is not None and expected != fingerprint:
        raise SkillevalError(
            f"checkpoint {inputs.checkpoint_id} at {inputs.checkpoint_path} has fingerprint "
            f"{fingerprint}, but the registry expects {expected}: the weights changed. "
            "Register the new weights under a new checkpoint_id (and experiment name)."
        )
    return fingerprint


def masked_prompts(
    prompt: Prompt,
    skills: Sequence[Skill],
    task_ids: Sequence[str],
    design_path: str,
    mask_run: str,
) -> dict[str, str]:
    """System prompt per task with the task's mask of the bank applied (Gate A runs)."""
    design = json.loads(Path(design_path).read_text())
    chunk_ids = design["chunk_ids"]
    if [s.chunk_id for s in skills] != chunk_ids:
        raise SkillevalError(
            f"{design_path}: mask design was made for chunks {chunk_ids}, but the bank "
            f"holds {[s.chunk_id for s in skills]}; rebuild the design"
        )
    masks = design["runs"][mask_run]
    missing = sorted(set(task_ids) - set(masks))
    if missing:
        raise SkillevalError(f"{design_path}: no mask for tasks {missing[:3]}")
    return {
        t: prompt.message([s for s, bit in zip(skills, masks[t], strict=True) if bit])
        for t in task_ids
    }


def resolve(inputs: RunInputs, code: Mapping[str, str]) -> ResolvedRun:
    """``code``: the evidence code of the run (provenance.evidence.model_run_code)."""
    skills = load_bank(inputs.bank_path, inputs.bank_chunks) if inputs.bank_path else []
    prompt = Prompt.load(inputs.system_prompt_file, inputs.skill_template_file)
    task_ids = load_task_ids(inputs.split_file, inputs.split)
    mask_hash = None
    if inputs.mask_path and inputs.mask_run:
        prompts = masked_prompts(prompt, skills, task_ids, inputs.mask_path, inputs.mask_run)
        mask_hash = canonical_hash(prompts)
    else:
        prompts = dict.fromkeys(task_ids, prompt.message(skills))
    identity = model_run_identity(
        protocol=inputs.protocol_name,
        protocol_digest=protocol_digest(inputs.protocol_name, inputs.protocol),
        checkpoint_id=inputs.checkpoint_id,
        checkpoint_fingerprint=checked_checkpoint(inputs),
        bank=inputs.bank_name,
        bank_hash=bank_hash(skills) if inputs.bank_path else None,
        split=inputs.split,
        split_hash=file_sha256(inputs.split_file),
        prompt_hash=prompt.digest,
        backends=inputs.backends,
        sim_policy_version=SIM_POLICY_VERSION if inputs.backends["policy"] == "sim" else None,
        code=code,
        mask_hash=mask_hash,
    )
    repeats = inputs.protocol.runtime.repeats
    return ResolvedRun(
        identity=identity,
        keys=[(t, r) for t in task_ids for r in range(repeats)],
        prompts=prompts,
        # Hash of every injected chunk, so a stale report can name the chunk that changed.
        chunk_hashes={s.chunk_id: bank_hash([s])[:16] for s in skills},
    )
