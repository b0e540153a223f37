"""The report's plots, drawn with matplotlib on its non-interactive Agg canvas (no pyplot, so no
figure outlives its report): occurrences stacked by category per group, OR per category with CI whiskers, task success
against OR. Each plot is a Figure; `render` writes it as SVG or PNG, byte for byte the same for the
same table."""

import io
import itertools
import math

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.text import Text
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import Bbox

from spillage.audit.model import CATEGORIES

COLOURS = {"C_E": "#c0392b", "C_I": "#f1948a", "B_E": "#1f618d", "B_I": "#85c1e9"}
POINT, WHISKER = "#1f618d", "#888888"
STYLE = {"font.family": "sans-serif", "font.size": 9}
PNG_DPI = 150
MARKER = 5  # points across a dot
ROW_INCHES = 0.3
KEY_LINE_INCHES = 0.17  # one group's line in the success plot's key
LABEL_STEP = 7  # points between the rings of places tried for a point's number
DIRECTIONS = ((1, 1), (1, -1), (-1, 1), (-1, -1), (1, 0), (0, 1), (-1, 0), (0, -1))


def new_figure(width: float, height: float) -> Figure:
    """A Figure of that size in inches on an Agg canvas."""
    figure = Figure(figsize=(width, height))
    FigureCanvasAgg(figure)
    return figure


def group_labels(table: pd.DataFrame, by: tuple[str, ...]) -> list[str]:
    """'framework / model / site / style' for each row of a group table."""
    return [" / ".join(str(row[k]) for k in by) for _, row in table.iterrows()]


def rate_axis(values) -> tuple[float, float]:
    """The limits of a rate axis: from a little below 0 (so that a dot at 0 shows whole) to a little
    beyond the largest finite value, or to 1 when there is none."""
    finite = [v for v in values if math.isfinite(v)]
    end = max(finite) * 1.1 if finite and max(finite) > 0 else 1.0
    return -0.03 * end, end


def stacked_occurrences(table: pd.DataFrame, by: tuple[str, ...]) -> Figure:
    """Occurrences per group as one horizontal bar stacked by category (the paper's Figure 4), its
    total at its end; counts get whole-number ticks only."""
    labels = group_labels(table, by)
    figure = new_figure(7, 1.4 + ROW_INCHES * len(labels))
    ax = figure.add_subplot()
    rows = range(len(labels))
    left = pd.Series(0, index=table.index)
    for c in CATEGORIES:
        ax.barh(rows, table[c], left=left, color=COLOURS[c], label=c, height=0.7)
        left = left + table[c]
    for y, total in zip(rows, left):
        ax.text(total, y, f" {total}", va="center")
    ax.set_yticks(rows, labels)
    ax.invert_yaxis()
    ax.set_xlim(0, max(left.max() * 1.15, 1))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("occurrences")
    ax.grid(axis="x", color="#dddddd")
    ax.set_axisbelow(True)
    ax.legend(ncols=len(CATEGORIES), loc="lower center", bbox_to_anchor=(0.5, 1), frameon=False)
    return figure


def or_whiskers(table: pd.DataFrame, by: tuple[str, ...]) -> Figure:
    """OR per category, one panel each on a common scale: a dot per group and its 95% CI as a whisker."""
    labels = group_labels(table, by)
    figure = new_figure(9, 1.0 + ROW_INCHES * len(labels))
    panels = figure.subplots(1, len(CATEGORIES), sharex=True, sharey=True)
    rows = pd.Series(range(len(labels)), index=table.index)
    for ax, c in zip(panels, CATEGORIES):
        value, low, high = table[f"or_{c}"], table[f"or_{c}_low"], table[f"or_{c}_high"]
        with_ci = low.notna()
        ax.hlines(rows[with_ci], low[with_ci], high[with_ci], color=COLOURS[c], linewidth=2)
        ax.plot(value, rows, "o", color=COLOURS[c], markersize=MARKER)
        ax.set_title(f"OR {c}", fontweight="bold")
        ax.grid(axis="x", color="#dddddd")
        ax.set_axisbelow(True)
    panels[0].set_yticks(rows, labels)
    panels[0].set_ylim(len(labels) - 0.5, -0.5)
    panels[0].set_xlim(rate_axis(table[[f"or_{c}{side}" for c in CATEGORIES for side in ("", "_high")]]
                                 .to_numpy().ravel()))
    panels[0].xaxis.set_major_locator(MaxNLocator(3))
    return figure


def success_vs_or(table: pd.DataFrame, by: tuple[str, ...]) -> Figure:
    """Task success (y) against overall OR (x), one numbered point per group with both CIs as
    whiskers; the numbers are placed so that none covers another, and the key names their groups."""
    labels = group_labels(table, by)
    low, high = success_span(table)
    figure = new_figure(7.5, max(1.6 + 2.9 * (high - low) / 1.1, 0.9 + KEY_LINE_INCHES * len(labels)))
    ax = figure.add_axes((0.1, 0.12, 0.5, 0.8))
    ax.set_xlim(rate_axis(table["or_all_high"].fillna(table["or_all"])))
    ax.set_ylim(low, high)
    ax.set_yticks([t for t in MaxNLocator(4, steps=[1, 2, 2.5, 5, 10]).tick_values(low, high) if 0 <= t <= 1])
    ax.set_xlabel("OR (all categories)")
    ax.set_ylabel("task success")
    ax.grid(color="#eeeeee")
    shown = table[table["or_all"].notna()]
    ax.errorbar(shown["or_all"], shown["task_success"], xerr=whisker_lengths(shown, "or_all"),
                yerr=whisker_lengths(shown, "task_success"), fmt="o", color=POINT, ecolor=WHISKER, elinewidth=1,
                markersize=MARKER)
    numbers = [n for n, has_or in enumerate(table["or_all"].notna(), start=1) if has_or]
    place_numbers(ax, numbers, list(zip(shown["or_all"], shown["task_success"])))
    blank = Line2D([], [], linestyle="none")
    ax.legend([blank] * len(labels), [f"{n}  {label}" for n, label in enumerate(labels, start=1)], title="groups",
              loc="upper left", bbox_to_anchor=(1.03, 1), handlelength=0, handletextpad=0, frameon=False,
              alignment="left")
    return figure


def success_span(table: pd.DataFrame) -> tuple[float, float]:
    """The task-success axis: the span of the values and their CIs, a little beyond, within -0.05..1.05;
    when every group succeeds alike, a narrow band around that value, not an empty square."""
    values = pd.concat([table["task_success"], table["task_success_low"], table["task_success_high"]]).dropna()
    if values.empty:
        return -0.05, 1.05
    pad = max(0.05, 0.1 * (values.max() - values.min()))
    return max(-0.05, values.min() - pad), min(1.05, values.max() + pad)


def whisker_lengths(table: pd.DataFrame, metric: str) -> np.ndarray:
    """How far each row's CI reaches below and above its value (two rows, as errorbar takes them); 0
    where there is no CI."""
    low, high = table[f"{metric}_low"], table[f"{metric}_high"]
    return np.nan_to_num(np.vstack([table[metric] - low, high - table[metric]]))


def place_numbers(ax, numbers: list[int], points: list[tuple[float, float]]) -> None:
    """Write each point's number beside it, at the first place, ring by ring outwards, where it covers
    no point and no number already written; a number set apart from its point gets a leader line."""
    renderer = ax.figure.canvas.get_renderer()
    radius = MARKER / 2 * ax.figure.dpi / 72  # a dot's, in display units
    taken = [Bbox.from_bounds(x - radius, y - radius, 2 * radius, 2 * radius)
             for x, y in ax.transData.transform(np.reshape(points, (-1, 2)))]
    for number, point in zip(numbers, points):
        for ring, (dx, dy) in offsets():
            label = ax.annotate(str(number), point, xytext=(dx, dy), textcoords="offset points", ha="center",
                                va="center", fontsize=8, arrowprops={"arrowstyle": "-", "color": WHISKER,
                                                                     "linewidth": 0.5} if ring > 1 else None)
            box = label_box(label, renderer).padded(1)
            if not any(box.overlaps(other) for other in taken):
                taken.append(box)
                break
            label.remove()


def offsets():
    """(ring, (dx, dy)): offsets in points around a point, eight per ring, nearest ring first."""
    for ring in itertools.count(1):
        for dx, dy in DIRECTIONS:
            yield ring, (dx * ring * LABEL_STEP, dy * ring * LABEL_STEP)


def label_box(label: Text, renderer) -> Bbox:
    """Where a point's number is drawn, in display units: its text alone, not its leader line."""
    label.update_positions(renderer)  # from its point and offset to where its text goes
    return Text.get_window_extent(label, renderer)


PLOTS = {"occurrences": stacked_occurrences, "or": or_whiskers, "success_vs_or": success_vs_or}


def draw(name: str, table: pd.DataFrame, by: tuple[str, ...]) -> Figure:
    """The plot `name` (a key of PLOTS) of a group table, in the report's style."""
    with matplotlib.rc_context(STYLE):
        return PLOTS[name](table, by)


def render(figure: Figure, name: str, kind: str) -> bytes:
    """`figure` as an SVG or PNG file's bytes; the same figure always gives the same bytes (no date in
    the metadata, SVG ids salted with the plot's name so three plots in one page never share one)."""
    buffer = io.BytesIO()
    # SVG text stays text: searchable, and no glyph ids that the three plots of a page would share
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": name}):
        figure.savefig(buffer, format=kind, bbox_inches="tight", dpi=PNG_DPI,
                       metadata={"Date": None} if kind == "svg" else None)
    return buffer.getvalue()
