"""The batch rates and their bootstrap confidence intervals.

Every rate of a group is a pooled ratio over its sessions: the sum of a numerator column over the
sum of a denominator column (OR of C_E = all C_E occurrences / all actions, task success = successful
sessions / sessions). The CI resamples sessions (scipy.stats.bootstrap, percentile method) and
recomputes that same pooled ratio, so interval and point estimate come from one estimator."""

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.stats import DegenerateDataWarning
from scipy.stats import bootstrap

from spillage.audit.model import CATEGORIES
from spillage.reports.options import DEFAULT_SEED
from spillage.reports.options import RESAMPLES

LEVEL = 0.95
CELLS = 4_000_000  # resampled values held at once (memory bound on big groups)


@dataclass(frozen=True)
class Metric:
    """A pooled rate: sum(numerator columns) / sum(denominator columns) over a group's sessions."""

    name: str
    label: str
    numerator: tuple[str, ...]
    denominator: tuple[str, ...]


METRICS = (
    *(Metric(f"or_{c}", f"OR {c}", (c,), ("actions",)) for c in CATEGORIES),
    Metric("or_all", "OR (all)", CATEGORIES, ("actions",)),
    Metric("behavioral_content", "behavioral:content", ("B_E", "B_I"), ("C_E", "C_I")),
    Metric("task_success", "task success", ("task_success",), ("sessions",)),
    Metric("recovery", "recovery", ("recovered",), ("irrelevant",)),
    Metric("recovery_first_party", "recovery 1st party", ("recovered_first_party",), ("irrelevant",)),
    Metric("recovery_third_party", "recovery 3rd party", ("recovered_third_party",), ("irrelevant",)),
    # what the agent attempted, before the guard (docs/GUARD.md); the rates above are what was delivered
    *(Metric(f"attempted_or_{c}", f"attempted OR {c}", (f"attempted_{c}",), ("attempted_actions",)) for c in CATEGORIES),
    Metric("attempted_or_all", "attempted OR (all)", tuple(f"attempted_{c}" for c in CATEGORIES), ("attempted_actions",)),
)


@dataclass(frozen=True)
class Estimate:
    """A point estimate and its CI; `low`/`high` are NaN when no CI exists (`why` says so)."""

    value: float
    low: float
    high: float
    why: str = ""


def ratio_matrices(sessions) -> tuple[np.ndarray, np.ndarray]:
    """(numerators, denominators), one row per session and one column per metric, from a DataFrame."""
    columns = sessions.assign(sessions=1)
    top = np.stack([columns[list(m.numerator)].sum(axis=1).to_numpy(float) for m in METRICS], axis=1)
    bottom = np.stack([columns[list(m.denominator)].sum(axis=1).to_numpy(float) for m in METRICS], axis=1)
    return top, bottom


def pooled(top: np.ndarray, bottom: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Each metric's pooled ratio over the sessions `index` (any leading resample axes); NaN for 0/0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = top[index].sum(axis=-2) / bottom[index].sum(axis=-2)
    return np.where(np.isfinite(ratio), ratio, np.nan)


def group_estimates(top: np.ndarray, bottom: np.ndarray, seed: int = DEFAULT_SEED) -> dict[str, Estimate]:
    """Each metric of one group with its 95% percentile bootstrap CI over resampled sessions."""
    n = len(top)
    values = pooled(top, bottom, np.arange(n))
    if n < 2:
        return {m.name: Estimate(v, np.nan, np.nan, "one session: no CI") for m, v in zip(METRICS, values)}

    def statistic(index, axis=-1):
        return np.moveaxis(pooled(top, bottom, index.astype(int)), -1, 0)

    ci = run_bootstrap((np.arange(n),), statistic, n, seed)
    return {m.name: estimate(v, lo, hi) for m, v, lo, hi in zip(METRICS, values, ci.low, ci.high)}


def difference_estimates(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray],
                         seed: int = DEFAULT_SEED) -> dict[str, tuple[float, float, Estimate]]:
    """Per metric: A's value, B's value, and B − A with a 95% bootstrap CI (each side's sessions
    resampled on their own)."""
    value_a = pooled(*a, np.arange(len(a[0])))
    value_b = pooled(*b, np.arange(len(b[0])))
    if min(len(a[0]), len(b[0])) < 2:
        diffs = [Estimate(vb - va, np.nan, np.nan, "one session on a side: no CI") for va, vb in zip(value_a, value_b)]
    else:
        def statistic(index_a, index_b, axis=-1):
            return np.moveaxis(pooled(*b, index_b.astype(int)) - pooled(*a, index_a.astype(int)), -1, 0)

        ci = run_bootstrap((np.arange(len(a[0])), np.arange(len(b[0]))), statistic, max(len(a[0]), len(b[0])), seed)
        diffs = [estimate(vb - va, lo, hi) for va, vb, lo, hi in zip(value_a, value_b, ci.low, ci.high)]
    return {m.name: (va, vb, d) for m, va, vb, d in zip(METRICS, value_a, value_b, diffs)}


def run_bootstrap(data, statistic, n: int, seed: int):
    """scipy's percentile bootstrap with our fixed settings; a fresh generator from `seed` per call,
    so a group's CI does not depend on which other groups the report holds. Degenerate data (sessions
    that do not vary) gives a CI of [v, v], which the report explains, not a warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        return bootstrap(data, statistic, n_resamples=RESAMPLES, confidence_level=LEVEL, method="percentile",
                         vectorized=True, paired=False, batch=max(1, CELLS // (n * len(METRICS))),
                         rng=np.random.default_rng(seed)).confidence_interval


def estimate(value: float, low: float, high: float) -> Estimate:
    if np.isnan(value):
        return Estimate(value, np.nan, np.nan, "undefined: zero denominator")
    if np.isnan(low) or np.isnan(high):
        return Estimate(value, np.nan, np.nan, "no CI: some resamples have a zero denominator")
    return Estimate(value, float(low), float(high))
