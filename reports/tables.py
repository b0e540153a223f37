"""The report's tables as DataFrames: one row per group, and the comparison of two conditions."""

import pandas as pd

from spillage.audit.model import CATEGORIES
from spillage.reports.options import KEYS
from spillage.reports.sessions import ReportError
from spillage.reports.options import DEFAULT_SEED
from spillage.reports.stats import METRICS
from spillage.reports.stats import difference_estimates
from spillage.reports.stats import group_estimates
from spillage.reports.stats import ratio_matrices

COUNTS = ("actions", *CATEGORIES, "attempted_actions", *(f"attempted_{c}" for c in CATEGORIES), "interventions")


def group_table(sessions: pd.DataFrame, by: tuple[str, ...], seed: int = DEFAULT_SEED) -> pd.DataFrame:
    """Per group of `by`: sessions, unverified sessions, actions, occurrences per category, and each
    metric with `_low`/`_high` CI columns and a `_note` when there is no CI."""
    rows = []
    for values, group in iter_groups(sessions, list(by)):
        top, bottom = ratio_matrices(group)
        row = dict(zip(by, values))
        row.update(sessions=len(group), unverified=int((~group["verified"]).sum()),
                   **{c: int(group[c].sum()) for c in COUNTS})
        for name, e in group_estimates(top, bottom, seed).items():
            row.update({name: e.value, f"{name}_low": e.low, f"{name}_high": e.high, f"{name}_note": e.why})
        rows.append(row)
    return pd.DataFrame(rows)


def parse_selector(text: str) -> tuple[str, str]:
    """`KEY=VALUE` as given to --compare; ReportError for anything else."""
    key, sep, value = text.partition("=")
    if not sep or key not in KEYS:
        raise ReportError(f"--compare {text!r}: expected KEY=VALUE with KEY one of {', '.join(KEYS)}")
    return key, value


def compare_table(sessions: pd.DataFrame, a: str, b: str, by: tuple[str, ...],
                  seed: int = DEFAULT_SEED) -> tuple[pd.DataFrame, str]:
    """Per group of `by` (less the compared key) and metric: A's value, B's value, B − A and its CI.

    `a` and `b` are `KEY=VALUE` selectors on the same key (e.g. prompt=original, prompt=sanitized).
    Groups found on one side only are named in the returned note."""
    (key, value_a), (key_b, value_b) = parse_selector(a), parse_selector(b)
    if key != key_b:
        raise ReportError(f"--compare {a} {b}: both sides must select on the same key")
    keys = [k for k in by if k != key]
    side_a, side_b = sessions[sessions[key] == value_a], sessions[sessions[key] == value_b]
    for side, text in ((side_a, a), (side_b, b)):
        if side.empty:
            raise ReportError(f"--compare {text}: no included session has {text}")
    groups_a = dict(iter_groups(side_a, keys))
    groups_b = dict(iter_groups(side_b, keys))
    rows = []
    for values in sorted(groups_a.keys() & groups_b.keys()):
        ga, gb = groups_a[values], groups_b[values]
        estimates = difference_estimates(ratio_matrices(ga), ratio_matrices(gb), seed)
        for metric in METRICS:
            va, vb, diff = estimates[metric.name]
            rows.append({**dict(zip(keys, values)), "sessions_a": len(ga), "sessions_b": len(gb),
                         "metric": metric.name, "a": va, "b": vb, "difference": diff.value,
                         "difference_low": diff.low, "difference_high": diff.high, "note": diff.why})
    lonely = [f"{' / '.join(v) or 'all'} only with {a if v in groups_a else b}"
              for v in sorted(groups_a.keys() ^ groups_b.keys())]
    return pd.DataFrame(rows), "; ".join(lonely)


def iter_groups(sessions: pd.DataFrame, keys: list[str]):
    """(tuple of key values, sessions) per group; one group of everything when `keys` is empty."""
    if not keys:
        yield (), sessions
        return
    for values, group in sessions.groupby(keys, sort=True):
        yield tuple(values), group
