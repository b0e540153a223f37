"""`spillage report`: write a batch's tables, plots and pages into one folder.

Outputs depend only on the sessions, the options and the seed: no timestamps, sorted groups, so
two runs give byte-identical files."""

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from spillage.reports.document import Figure
from spillage.reports.document import compare_blocks
from spillage.reports.document import excluded_blocks
from spillage.reports.document import group_tables
from spillage.reports.document import method_paragraph
from spillage.reports.document import to_html
from spillage.reports.document import to_markdown
from spillage.reports.plots import PLOTS
from spillage.reports.sessions import DEFAULT_KEYS
from spillage.reports.sessions import Batch
from spillage.reports.sessions import ReportError
from spillage.reports.stats import DEFAULT_SEED
from spillage.reports.tables import compare_table
from spillage.reports.tables import group_table

TITLE = "Spillage batch report"
EVENT_COLUMNS = ("session", "framework", "model", "site", "style", "scenario", "prompt", "note", "category",
                 "attribute", "class", "action", "what", "channel", "text", "matched", "seq", "observers",
                 "judge", "confidence")
FIGURES = {"occurrences": "Occurrences by category per group",
           "or": "Oversharing rate per category with 95% CI",
           "success_vs_or": "Task success against OR per group"}


@dataclass
class ReportOptions:
    by: tuple[str, ...] = DEFAULT_KEYS
    seed: int = DEFAULT_SEED
    compare: tuple[str, str] | None = None
    png: bool = False


def write_batch_report(batch: Batch, out: Path, options: ReportOptions = ReportOptions()) -> list[Path]:
    """Write report.md, report.html, tables.csv, sessions.csv, events.parquet, plots/*.svg (and
    compare.csv with a comparison, plots/*.png on request) into `out`; the paths written."""
    if not batch.sessions:
        raise ReportError("no session to report: " + ("; ".join(f"{n}: {why}" for n, why in batch.excluded)
                                                        or "no session folders found"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "plots").mkdir(exist_ok=True)
    sessions = pd.DataFrame(batch.sessions)
    table = group_table(sessions, options.by, options.seed)
    figures = [Figure(name, title, PLOTS[name](table, options.by)) for name, title in FIGURES.items()]
    blocks = [method_paragraph(len(sessions), len(batch.excluded), options.by, options.seed,
                               int((~sessions["verified"]).sum()), int(sessions["imported"].sum())),
              *group_tables(table, options.by), *figures]
    written = {}
    if options.compare:
        compared, lonely = compare_table(sessions, *options.compare, options.by, options.seed)
        blocks += compare_blocks(compared, *options.compare, options.by, lonely)
        written["compare.csv"] = csv_text(compared)
    blocks += excluded_blocks(batch.excluded)
    events = pd.DataFrame(batch.events, columns=list(EVENT_COLUMNS))
    written.update({
        "report.md": to_markdown(TITLE, blocks, ".png" if options.png else ".svg"),
        "report.html": to_html(TITLE, blocks),
        "tables.csv": csv_text(table),
        "sessions.csv": csv_text(sessions),
        **{f"plots/{f.name}.svg": f.svg for f in figures},
    })
    paths = []
    for name, text in written.items():
        (out / name).write_text(text, encoding="utf-8")
        paths.append(out / name)
    events.to_parquet(out / "events.parquet", index=False)
    paths.append(out / "events.parquet")
    if options.png:
        from spillage.reports.png import svg_to_png

        paths += [svg_to_png(out / f"plots/{f.name}.svg") for f in figures]
    return paths


def csv_text(frame: pd.DataFrame) -> str:
    return frame.to_csv(index=False, lineterminator="\n")

