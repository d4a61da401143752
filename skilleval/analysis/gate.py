"""Gate A: masked-run observations and per-chunk signed effects.

Each gate result is also kept under results/history/gate/ by content hash, so a rebuilt
gate never loses the old one (results/archive/ holds only what was superseded).

The per-task paired delta (masked run minus bare run, same task) is regressed on the
0/1 mask matrix without an intercept (memo §2 C): a task with no chunk in its mask should
show no delta. Fitted with statsmodels' OLS.

What that model absorbs: any effect of having a skills section at all (its header, a
longer prompt) is shared by every masked row, and without an intercept it lands on every
beta. The share each beta takes is a property of the design alone,
``(X'X)^-1 X' 1[any chunk]`` (about 1 / 8.5 per chunk for 16 chunks at inclusion 1/2),
so it is reported before any result is read. Beside the memo's fit the gate therefore
fits the same design with an intercept (the common "any skills" effect) as a sensitivity
analysis; the frozen banks stay frozen from the memo's model.

Every row of one task subtracts the same bare-run reward, so the rows of a task share
noise: standard errors and the full covariance are task-clustered (CR1 sandwich, the
statsmodels default small-sample correction), and everything that adds betas (a bank's
predicted effect, experiment B) uses that covariance. The naive OLS errors are kept
beside them for comparison.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# scipy.stats.t and .norm evaluate these very functions (scipy/stats/_continuous_distns.py:
# t_gen._sf is stdtr(df, -x), t_gen._ppf is stdtrit, norm's is ndtri); scipy.special imports
# in a third of scipy.stats' 1.7 s, which every job that reads a gate pays
import scipy.special

from skilleval.analysis.bootstrap import align, per_task_means
from skilleval.analysis.contrast import RunRecords
from skilleval.errors import ComparisonError
from skilleval.paths import RunFiles
from skilleval.records.analysis import GateBeta, GateDesign
from skilleval.records.provenance import provenance
from skilleval.skills.bank import bank_hash, load_bank
from skilleval.storage.hashing import file_sha256

INTERCEPT = "(any skills)"


@dataclass(frozen=True)
class GateFit:
    chunk_ids: tuple[str, ...]
    # With an intercept, element 0 of beta (and row/column 0 of covariance) is its term.
    beta: np.ndarray
    covariance: np.ndarray
    naive_standard_error: np.ndarray
    n_observations: int
    n_clusters: int
    residual_sd: float
    r_squared_uncentred: float
    condition_number: float
    intercept: bool = False

    @property
    def terms(self) -> tuple[str, ...]:
        return ((INTERCEPT,) if self.intercept else ()) + self.chunk_ids

    @property
    def chunk_beta(self) -> np.ndarray:
        """The per-chunk coefficients, without the intercept term."""
        beta: np.ndarray = self.beta[1:] if self.intercept else self.beta
        return beta

    @property
    def standard_error(self) -> np.ndarray:
        se: np.ndarray = np.sqrt(np.diag(self.covariance))
        return se

    @property
    def t_values(self) -> np.ndarray:
        t: np.ndarray = self.beta / self.standard_error
        return t

    @property
    def p_values(self) -> np.ndarray:
        p: np.ndarray = 2 * scipy.special.stdtr(self.degrees_of_freedom, -np.abs(self.t_values))
        return p

    @property
    def degrees_of_freedom(self) -> int:
        """Of the clustered t statistics: clusters - 1 (statsmodels' convention)."""
        return self.n_clusters - 1

    def as_json(self) -> dict[str, Any]:
        terms = [
            {
                "chunk_id": c,
                "beta": float(b),
                "standard_error": float(se),
                "standard_error_naive": float(naive),
                "t": float(t),
                "p_value": float(p),
            }
            for c, b, se, naive, t, p in zip(
                self.terms,
                self.beta,
                self.standard_error,
                self.naive_standard_error,
                self.t_values,
                self.p_values,
                strict=True,
            )
        ]
        result: dict[str, Any] = {
            "chunks": terms[1:] if self.intercept else terms,
            "covariance": {
                "type": "cluster",
                "groups": "task_id",
                "correction": "CR1: G/(G-1) x (N-1)/(N-K)",
                "n_clusters": self.n_clusters,
                "chunk_ids": list(self.terms),
                "matrix": self.covariance.tolist(),
            },
            "diagnostics": {
                "n_observations": self.n_observations,
                "degrees_of_freedom": self.degrees_of_freedom,
                "residual_sd": self.residual_sd,
                "r_squared_uncentred": self.r_squared_uncentred,
                "condition_number": self.condition_number,
                "intercept": self.intercept,
                "fitted_by": "statsmodels OLS",
            },
        }
        if self.intercept:
            result["intercept"] = {k: v for k, v in terms[0].items() if k != "chunk_id"}
        return result


def common_effect_loading(masks: np.ndarray) -> np.ndarray:
    """How much of a common effect c of any skills section each no-intercept beta takes
    (per unit of c): the least-squares coefficients of 1[row shows a chunk] on the masks."""
    any_chunk = (np.asarray(masks).sum(axis=1) > 0).astype(np.float64)
    loading: np.ndarray = np.linalg.lstsq(masks, any_chunk, rcond=None)[0]
    return loading


def _checked_design(masks: np.ndarray, deltas: np.ndarray, groups: np.ndarray, k_ids: int) -> None:
    n, k = masks.shape if masks.ndim == 2 else (0, 0)
    if masks.ndim != 2 or deltas.shape != (n,) or groups.shape != (n,):
        raise ValueError(
            f"masks must be (n, k), deltas and groups (n,), got {masks.shape}, "
            f"{deltas.shape}, {groups.shape}"
        )
    if k != k_ids:
        raise ValueError(f"{k} mask columns but {k_ids} chunk ids")
    if not np.isin(masks, (0.0, 1.0)).all():
        raise ValueError("masks must be 0/1")
    if n <= k:
        raise ValueError(f"need more observations than chunks, got {n} <= {k}")
    if np.linalg.matrix_rank(masks) < k:
        raise ValueError(
            "mask matrix is rank-deficient: some chunk is never (or always "
            "jointly) masked in; redesign the masks"
        )
    if len(np.unique(groups)) < 2:
        raise ValueError("need at least two tasks (clusters) for clustered errors")


def fit_gate(
    masks: np.ndarray,
    deltas: np.ndarray,
    chunk_ids: tuple[str, ...],
    groups: Sequence[str],
    intercept: bool = False,
) -> GateFit:
    """OLS of deltas on masks (rows: task x masked run), task-clustered; the memo's model
    has no intercept, ``intercept=True`` adds the common "any skills" term."""
    # lazy: only the gate rules need it; the two modules, not statsmodels.api's many
    from statsmodels.regression.linear_model import OLS
    from statsmodels.tools.tools import add_constant

    masks = np.asarray(masks, dtype=np.float64)
    deltas = np.asarray(deltas, dtype=np.float64)
    codes = np.unique(np.asarray(groups), return_inverse=True)[1]
    _checked_design(masks, deltas, codes, len(chunk_ids))
    design = add_constant(masks, has_constant="add") if intercept else masks
    if intercept and np.linalg.matrix_rank(design) < design.shape[1]:
        raise ValueError(
            "mask matrix with an intercept is rank-deficient: every row shows the same "
            "number of chunks, so the common effect cannot be told from the chunk effects"
        )
    model = OLS(deltas, design)
    naive = model.fit()
    clustered = model.fit(cov_type="cluster", cov_kwds={"groups": codes})
    residuals = deltas - design @ clustered.params
    total = float(deltas @ deltas)
    return GateFit(
        chunk_ids=chunk_ids,
        beta=np.asarray(clustered.params),
        covariance=np.asarray(clustered.cov_params()),
        naive_standard_error=np.asarray(naive.bse),
        n_observations=len(deltas),
        n_clusters=int(codes.max() + 1),
        residual_sd=float(np.sqrt(naive.scale)),
        r_squared_uncentred=1 - float(residuals @ residuals) / total if total > 0 else 0.0,
        condition_number=float(np.linalg.cond(design)),
        intercept=intercept,
    )


def fit_comparison(
    memo: GateFit, sensitivity: GateFit, masks: np.ndarray, k: int
) -> dict[str, Any]:
    """Per chunk, the memo's beta beside the intercept fit's, and where they disagree:
    a sign, or membership of the Top-k or Bottom-k (the frozen banks' selection rules)."""
    ids = memo.chunk_ids
    memo_beta, other_beta = memo.chunk_beta, sensitivity.chunk_beta
    loading = common_effect_loading(masks)
    common = float(sensitivity.beta[0])

    def members(beta: np.ndarray) -> dict[str, set[str]]:
        ranked = sorted(zip(ids, beta, strict=True), key=lambda c: (-float(c[1]), c[0]))
        return {
            "top": {c for c, _ in ranked[:k]},
            "bottom": {c for c, _ in ranked[-k:]},
        }

    memo_sets, other_sets = members(memo_beta), members(other_beta)
    rows = []
    for i, chunk in enumerate(ids):
        memo_group = [g for g in ("top", "bottom") if chunk in memo_sets[g]]
        other_group = [g for g in ("top", "bottom") if chunk in other_sets[g]]
        rows.append(
            {
                "chunk_id": chunk,
                "beta_memo": float(memo_beta[i]),
                "beta_intercept_fit": float(other_beta[i]),
                "loading_of_common_effect": float(loading[i]),
                "absorbed_common_effect": float(loading[i] * common),
                "sign_differs": bool(np.sign(memo_beta[i]) != np.sign(other_beta[i])),
                "selection_memo": "/".join(memo_group) or "-",
                "selection_intercept_fit": "/".join(other_group) or "-",
                "selection_differs": memo_group != other_group,
            }
        )
    return {
        "k": k,
        "common_effect": common,
        "chunks": rows,
        "sign_differs": [r["chunk_id"] for r in rows if r["sign_differs"]],
        "selection_differs": [r["chunk_id"] for r in rows if r["selection_differs"]],
        "note": "loading_of_common_effect: the share of a common effect of any skills section "
        "that the no-intercept beta takes, (X'X)^-1 X' 1[any chunk], a property of the mask "
        "design; absorbed_common_effect: that share times the intercept fit's common effect",
    }


def gate_observations(
    bare: RunRecords,
    masked: Mapping[str, RunRecords],
    design: GateDesign,
    metric: str = "reward",
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Mask rows, paired deltas (masked - bare, task-aligned) and each row's task id,
    stacked over the masked runs."""
    for run in (bare, *masked.values()):
        if run.summary.coverage < 1:
            raise ComparisonError(f"{run.name}: coverage {run.summary.coverage} < 1")
    bare_means = per_task_means(bare.records, metric, bare.name)
    rows: list[list[int]] = []
    deltas: list[float] = []
    tasks: list[str] = []
    for name, run in masked.items():
        pairs = align(bare_means, per_task_means(run.records, metric, run.name), (bare.name, name))
        masks = design.runs[name]
        rows.extend(masks[t] for t in pairs.task_ids)
        deltas.extend(pairs.deltas)
        tasks.extend(pairs.task_ids)
    return np.asarray(rows, dtype=np.float64), np.asarray(deltas), tasks


def power_note(
    fit: GateFit, masked_runs: int, effect: float = 0.02, power: float = 0.8
) -> dict[str, Any]:
    """How many masked runs would tell a chunk effect of ``effect`` from zero.

    A beta's standard error shrinks as 1 / sqrt(observations), and observations grow with
    masked runs, so from the measured mean error: runs = R x (SE / SE_needed)^2 with
    SE_needed = effect / (z_{1-alpha/2} + z_power), two-sided alpha 0.05."""
    z = scipy.special.ndtri(0.975) + scipy.special.ndtri(power)
    needed_se = effect / z
    mean_se = float(np.mean(fit.standard_error))
    runs = int(np.ceil(masked_runs * (mean_se / needed_se) ** 2))
    return {
        "effect": effect,
        "alpha": 0.05,
        "power": power,
        "mean_standard_error": mean_se,
        "masked_runs": masked_runs,
        "masked_runs_needed": runs,
        "note": f"with the measured mean SE {mean_se:.4f} from {masked_runs} masked runs, "
        f"about {runs} masked runs distinguish a chunk effect of {effect} from zero at "
        f"{power:.0%} power (two-sided 5%)",
    }


def gate_fits(
    masks: np.ndarray,
    deltas: np.ndarray,
    chunk_ids: tuple[str, ...],
    tasks: Sequence[str],
    k: int,
    masked_runs: int,
) -> dict[str, Any]:
    """The fields of a gate beta record computed from the observations: the memo's fit,
    the intercept fit and their comparison."""
    fit = fit_gate(masks, deltas, chunk_ids, tasks)
    sensitivity = fit_gate(masks, deltas, chunk_ids, tasks, intercept=True)
    order = np.argsort(-fit.beta, kind="stable")
    return {
        **fit.as_json(),
        "power": power_note(fit, masked_runs),
        "signed_order": [chunk_ids[i] for i in order],
        "intercept_fit": sensitivity.as_json(),
        "comparison": fit_comparison(fit, sensitivity, masks, k),
    }


def build_beta(
    bare_files: RunFiles,
    masked_files: Mapping[str, RunFiles],
    design_path: str,
    bank_path: str,
    k: int,
    output: str,
    history_dir: str,
) -> dict[str, Any]:
    design = GateDesign.read(design_path)
    bare = RunRecords.load(bare_files)
    masked = {name: RunRecords.load(files) for name, files in masked_files.items()}
    masks, deltas, tasks = gate_observations(bare, masked, design)
    result = gate_fits(masks, deltas, tuple(design.chunk_ids), tasks, k, len(masked))
    result["inputs"] = {
        "bare_run": bare.summary.fingerprint,
        "masked_runs": {n: r.summary.fingerprint for n, r in masked.items()},
        "design_sha256": file_sha256(design_path),
        "bank_hash": bank_hash(load_bank(bank_path)),
    }
    result["provenance"] = provenance()
    record = GateBeta.create(**result)
    record.write(output)
    history = Path(history_dir) / record.content_sha256()[:16]
    history.mkdir(parents=True, exist_ok=True)
    shutil.copy(output, history / Path(output).name)
    return result
