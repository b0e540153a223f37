"""The report's plots as standalone SVG text, drawn by hand (no plotting library, nothing fetched):
occurrences stacked by category per group, OR per category with CI whiskers, task success against OR."""

import math
from html import escape

import pandas as pd

from spillage.audit.model import CATEGORIES

COLOURS = {"C_E": "#c0392b", "C_I": "#f1948a", "B_E": "#1f618d", "B_I": "#85c1e9"}
FONT = "font-family='sans-serif' font-size='12'"
ROW, CHAR, PAD = 22, 7, 12


def group_labels(table: pd.DataFrame, by: tuple[str, ...]) -> list[str]:
    """'framework / model / site / style' for each row of a group table."""
    return [" / ".join(str(row[k]) for k in by) for _, row in table.iterrows()]


def svg(width: float, height: float, body: list[str], title: str) -> str:
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{width:.0f}' height='{height:.0f}' "
            f"viewBox='0 0 {width:.0f} {height:.0f}' {FONT}><title>{escape(title)}</title>"
            f"<rect width='100%' height='100%' fill='white'/>" + "".join(body) + "</svg>")


def text(x: float, y: float, value: str, anchor: str = "start", extra: str = "") -> str:
    return f"<text x='{x:.1f}' y='{y:.1f}' text-anchor='{anchor}' {extra}>{escape(value)}</text>"


def nice_max(value: float) -> float:
    """A round axis end at or above `value` (1, 2 or 5 times a power of ten)."""
    if not value or not math.isfinite(value) or value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(step * power for step in (1, 2, 5, 10) if step * power >= value)


def axis(x0: float, y: float, width: float, top: float, ticks: int = 4, fmt: str = "{:g}",
         grid_top: float = PAD) -> list[str]:
    """A horizontal axis from 0 to `top` with tick labels and faint grid lines up to `grid_top`."""
    parts = [f"<line x1='{x0:.1f}' y1='{y:.1f}' x2='{x0 + width:.1f}' y2='{y:.1f}' stroke='#444'/>"]
    for i in range(ticks + 1):
        x = x0 + width * i / ticks
        parts.append(f"<line x1='{x:.1f}' y1='{grid_top:.1f}' x2='{x:.1f}' y2='{y:.1f}' stroke='#ddd'/>")
        parts.append(text(x, y + 14, fmt.format(round(top * i / ticks, 6)), "middle"))
    return parts


def legend(x: float, y: float) -> list[str]:
    parts = []
    for i, c in enumerate(CATEGORIES):
        parts.append(f"<rect x='{x + i * 70:.1f}' y='{y - 10:.1f}' width='12' height='12' fill='{COLOURS[c]}'/>")
        parts.append(text(x + i * 70 + 16, y, c))
    return parts


def stacked_occurrences(table: pd.DataFrame, by: tuple[str, ...]) -> str:
    """Occurrences per group as one horizontal bar stacked by category (the paper's Figure 4)."""
    labels = group_labels(table, by)
    left = PAD + CHAR * max(map(len, labels), default=10)
    width, height = 360, PAD + ROW * len(labels) + 50
    top = nice_max(table[list(CATEGORIES)].sum(axis=1).max() if len(table) else 0)
    body = axis(left, height - 40, width, top, fmt="{:.0f}")
    for i, (label, (_, row)) in enumerate(zip(labels, table.iterrows())):
        y, x = PAD + i * ROW, left
        body.append(text(left - 6, y + 14, label, "end"))
        for c in CATEGORIES:
            w = width * row[c] / top
            if w:
                body.append(f"<rect x='{x:.1f}' y='{y + 3:.1f}' width='{w:.1f}' height='{ROW - 6}' "
                            f"fill='{COLOURS[c]}'><title>{escape(label)}: {c} {row[c]}</title></rect>")
            x += w
        body.append(text(x + 4, y + 14, str(sum(int(row[c]) for c in CATEGORIES))))
    body += legend(left, height - 6)
    return svg(left + width + 60, height, body, "Occurrences by category per group")


def or_whiskers(table: pd.DataFrame, by: tuple[str, ...]) -> str:
    """OR per category, one panel each: a dot per group and its 95% CI as a whisker."""
    labels = group_labels(table, by)
    left = PAD + CHAR * max(map(len, labels), default=10)
    panel, gap = 170, 24
    height = PAD + 20 + ROW * len(labels) + 30
    columns = [f"or_{c}{end}" for c in CATEGORIES for end in ("", "_high")]
    top = nice_max(table[columns].max().max() if len(table) else 0)
    body = []
    for p, c in enumerate(CATEGORIES):
        x0 = left + p * (panel + gap)
        body.append(text(x0 + panel / 2, PAD + 8, f"OR {c}", "middle", "font-weight='bold'"))
        body += axis(x0, height - 24, panel, top, 2, grid_top=PAD + 16)
        for i, (_, row) in enumerate(table.iterrows()):
            y = PAD + 20 + i * ROW + ROW / 2
            value, low, high = row[f"or_{c}"], row[f"or_{c}_low"], row[f"or_{c}_high"]
            if not math.isnan(low):
                body.append(f"<line x1='{x0 + panel * low / top:.1f}' y1='{y:.1f}' x2='{x0 + panel * high / top:.1f}' "
                            f"y2='{y:.1f}' stroke='{COLOURS[c]}' stroke-width='2'/>")
            if not math.isnan(value):
                body.append(f"<circle cx='{x0 + panel * value / top:.1f}' cy='{y:.1f}' r='4' fill='{COLOURS[c]}'>"
                            f"<title>{escape(labels[i])}: OR {c} {value:.3f}</title></circle>")
    for i, label in enumerate(labels):
        body.append(text(left - 6, PAD + 20 + i * ROW + ROW / 2 + 4, label, "end"))
    return svg(left + 4 * (panel + gap), height, body, "Oversharing rate per category with 95% CI")


def success_vs_or(table: pd.DataFrame, by: tuple[str, ...]) -> str:
    """Task success (y) against overall OR (x), one numbered point per group with both CIs as
    whiskers, and the numbers' groups listed on the right."""
    labels = group_labels(table, by)
    size, left, bottom, top = 320, 60, 40, 36
    top_x = nice_max(table["or_all_high"].fillna(table["or_all"]).max() if len(table) else 0)
    key_x = left + size + 30
    width = key_x + CHAR * (max(map(len, labels), default=10) + 4)
    height = max(top + size + bottom, top + ROW * len(labels) + 10)
    body = axis(left, top + size, size, top_x, grid_top=top)
    body.append(f"<line x1='{left}' y1='{top}' x2='{left}' y2='{top + size}' stroke='#444'/>")
    for i in range(5):
        y = top + size - size * i / 4
        body.append(text(left - 6, y + 4, f"{i / 4:g}", "end"))
    body.append(text(left + size / 2, top + size + 34, "OR (all categories)", "middle"))
    body.append(text(14, top + size / 2, "task success", "middle", f"transform='rotate(-90 14 {top + size / 2:.1f})'"))
    for n, (label, (_, row)) in enumerate(zip(labels, table.iterrows()), start=1):
        body.append(text(key_x, top + (n - 1) * ROW + 14, f"{n}  {label}"))
        if math.isnan(row["or_all"]):
            continue
        x = left + size * row["or_all"] / top_x
        y = top + size - size * row["task_success"]
        if not math.isnan(row["or_all_low"]):
            body.append(f"<line x1='{left + size * row['or_all_low'] / top_x:.1f}' y1='{y:.1f}' "
                        f"x2='{left + size * row['or_all_high'] / top_x:.1f}' y2='{y:.1f}' stroke='#888'/>")
        if not math.isnan(row["task_success_low"]):
            body.append(f"<line x1='{x:.1f}' y1='{top + size - size * row['task_success_low']:.1f}' x2='{x:.1f}' "
                        f"y2='{top + size - size * row['task_success_high']:.1f}' stroke='#888'/>")
        body.append(f"<circle cx='{x:.1f}' cy='{y:.1f}' r='5' fill='#1f618d'><title>{escape(label)}: OR "
                    f"{row['or_all']:.3f}, success {row['task_success']:.2f}</title></circle>")
        body.append(text(x + 2 + 8 * ((n - 1) % 4), y - 8 - 10 * ((n - 1) % 2), str(n), extra="font-size='10'"))
    return svg(width, height, body, "Task success against OR per group")


PLOTS = {"occurrences": stacked_occurrences, "or": or_whiskers, "success_vs_or": success_vs_or}
