"""Gate A: masked-run observations and per-chunk signed effects.

Each gate result is also kept under results/archive/gate/ by content hash, so a rebuilt
gate never loses the old one.

The per-task paired delta (masked run minus bare run, same task) is regressed on the
0/1 mask matrix without an intercept: a task with no chunk in its mask should show no
delta, so an intercept would only absorb chunk effects. Standard errors are the usual
OLS ones; the result keeps the design and residuals' summary for diagnostics.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.linalg
import scipy.stats

from skilleval.analysis.bootstrap import align, per_task_means
from skilleval.analysis.contrast import RunRecords
from skilleval.analysis.records import GateBeta
from skilleval.errors import ComparisonError
from skilleval.provenance.record import provenance
from skilleval.skills.bank import bank_hash, load_bank
from skilleval.storage.hashing import file_sha256
from skilleval.storage.records import read_record


@dataclass(frozen=True)
class GateFit:
    chunk_ids: tuple[str, ...]
    beta: np.ndarray
    standard_error: np.ndarray
    n_observations: int
    residual_sd: float
    r_squared_uncentred: float
    condition_number: float

    @property
    def t_values(self) -> np.ndarray:
        t: np.ndarray = self.beta / self.standard_error
        return t

    def as_json(self) -> dict[str, Any]:
        df = self.n_observations - len(self.chunk_ids)
        p_values = 2 * scipy.stats.t.sf(np.abs(self.t_values), df)
        return {
            "chunks": [
                {
                    "chunk_id": c,
                    "beta": float(b),
                    "standard_error": float(se),
                    "t": float(t),
                    "p_value": float(p),
                }
                for c, b, se, t, p in zip(
                    self.chunk_ids,
                    self.beta,
                    self.standard_error,
                    self.t_values,
                    p_values,
                    strict=True,
                )
            ],
            "diagnostics": {
                "n_observations": self.n_observations,
                "degrees_of_freedom": df,
                "residual_sd": self.residual_sd,
                "r_squared_uncentred": self.r_squared_uncentred,
                "condition_number": self.condition_number,
                "intercept": False,
            },
        }


def fit_gate(masks: np.ndarray, deltas: np.ndarray, chunk_ids: tuple[str, ...]) -> GateFit:
    """Least squares of deltas on masks (rows: task x masked run), no intercept."""
    masks = np.asarray(masks, dtype=np.float64)
    deltas = np.asarray(deltas, dtype=np.float64)
    n, k = masks.shape if masks.ndim == 2 else (0, 0)
    if masks.ndim != 2 or deltas.shape != (n,):
        raise ValueError(f"masks must be (n, k) and deltas (n,), got {masks.shape}, {deltas.shape}")
    if k != len(chunk_ids):
        raise ValueError(f"{k} mask columns but {len(chunk_ids)} chunk ids")
    if not np.isin(masks, (0.0, 1.0)).all():
        raise ValueError("masks must be 0/1")
    if n <= k:
        raise ValueError(f"need more observations than chunks, got {n} <= {k}")
    if np.linalg.matrix_rank(masks) < k:
        raise ValueError(
            "mask matrix is rank-deficient: some chunk is never (or always "
            "jointly) masked in; redesign the masks"
        )
    beta, _, _, _ = scipy.linalg.lstsq(masks, deltas)
    residuals = deltas - masks @ beta
    sigma2 = float(residuals @ residuals) / (n - k)
    covariance = sigma2 * np.linalg.inv(masks.T @ masks)
    total = float(deltas @ deltas)
    return GateFit(
        chunk_ids=chunk_ids,
        beta=beta,
        standard_error=np.sqrt(np.diag(covariance)),
        n_observations=n,
        residual_sd=float(np.sqrt(sigma2)),
        r_squared_uncentred=1 - float(residuals @ residuals) / total if total > 0 else 0.0,
        condition_number=float(np.linalg.cond(masks)),
    )


def gate_observations(
    bare: RunRecords,
    masked: Mapping[str, RunRecords],
    design: Mapping[str, Any],
    metric: str = "reward",
) -> tuple[np.ndarray, np.ndarray]:
    """Mask rows and paired deltas (masked - bare, task-aligned) stacked over masked runs."""
    for run in (bare, *masked.values()):
        if run.summary.coverage < 1:
            raise ComparisonError(f"{run.name}: coverage {run.summary.coverage} < 1")
    bare_means = per_task_means(bare.records, metric, bare.name)
    rows: list[list[int]] = []
    deltas: list[float] = []
    for name, run in masked.items():
        pairs = align(bare_means, per_task_means(run.records, metric, run.name), (bare.name, name))
        masks = design["runs"][name]
        rows.extend(masks[t] for t in pairs.task_ids)
        deltas.extend(pairs.deltas)
    return np.asarray(rows, dtype=np.float64), np.asarray(deltas)


def run_dirs(names: Sequence[str], summaries: Sequence[str]) -> dict[str, str]:
    """Run name -> its directory, from the summary files a rule received as input."""
    return {n: str(Path(p).parent) for n, p in zip(names, summaries, strict=True)}


def build_beta(
    bare_dir: str,
    masked_dirs: Mapping[str, str],
    design_path: str,
    bank_path: str,
    output: str,
    archive_dir: str,
) -> dict[str, Any]:
    design = read_record(design_path, "gate_design")
    bare = RunRecords.load(bare_dir)
    masked = {name: RunRecords.load(d) for name, d in masked_dirs.items()}
    masks, deltas = gate_observations(bare, masked, design)
    fit = fit_gate(masks, deltas, tuple(design["chunk_ids"]))
    result = fit.as_json()
    order = np.argsort(-fit.beta, kind="stable")
    result["signed_order"] = [design["chunk_ids"][i] for i in order]
    result["inputs"] = {
        "bare_run": bare.summary.fingerprint,
        "masked_runs": {n: r.summary.fingerprint for n, r in masked.items()},
        "design_sha256": file_sha256(design_path),
        "bank_hash": bank_hash(load_bank(bank_path)),
    }
    result["provenance"] = provenance()
    record = GateBeta.create(**result)
    record.write(output)
    history = Path(archive_dir) / record.content_sha256()[:16]
    history.mkdir(parents=True, exist_ok=True)
    shutil.copy(output, history / Path(output).name)
    return result
