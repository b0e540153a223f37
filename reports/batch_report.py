"""`spillage report`: write a batch's tables, plots and pages into one folder.

Outputs depend only on the sessions, the options and the seed: no timestamps, sorted groups, so
two runs give byte-identical files."""

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from spillage.reports.document import Figure
from spillage.reports.document import compare_blocks
from spillage.reports.document import excluded_blocks
from spillage.reports.document import group_tables
from spillage.reports.document import method_paragraph
from spillage.reports.document import observer_blocks
from spillage.reports.document import to_html
from spillage.reports.document import to_markdown
from spillage.reports.plots import draw
from spillage.reports.plots import render
from spillage.reports.options import DEFAULT_KEYS
from spillage.reports.sessions import EVENT_SCHEMA
from spillage.reports.sessions import OBSERVER_COLUMNS
from spillage.reports.sessions import Batch
from spillage.reports.sessions import ReportError
from spillage.reports.options import DEFAULT_SEED
from spillage.reports.tables import compare_table
from spillage.reports.tables import group_table

TITLE = "Spillage batch report"
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
    """Write report.md, report.html, tables.csv, sessions.csv, observers.csv, events.parquet, plots/*.svg (and
    compare.csv with a comparison, plots/*.png on request) into `out`; the paths written."""
    if not batch.sessions:
        raise ReportError("no session to report: " + ("; ".join(f"{n}: {why}" for n, why in batch.excluded)
                                                        or "no session folders found"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "plots").mkdir(exist_ok=True)
    sessions = pd.DataFrame(batch.sessions)
    table = group_table(sessions, options.by, options.seed)
    drawn = {name: draw(name, table, options.by) for name in FIGURES}
    figures = [Figure(name, title, render(drawn[name], name, "svg").decode()) for name, title in FIGURES.items()]
    blocks = [method_paragraph(len(sessions), len(batch.excluded), options.by, options.seed,
                               int((~sessions["verified"]).sum()), int(sessions["imported"].sum()),
                               int(sessions["incomplete"].sum())),
              *group_tables(table, options.by), *figures]
    written = {}
    if options.compare:
        compared, lonely = compare_table(sessions, *options.compare, options.by, options.seed)
        blocks += compare_blocks(compared, *options.compare, options.by, lonely)
        written["compare.csv"] = csv_text(compared)
    blocks += observer_blocks(batch.observers) + excluded_blocks(batch.excluded)
    written.update({
        "report.md": to_markdown(TITLE, blocks, ".png" if options.png else ".svg"),
        "report.html": to_html(TITLE, blocks),
        "tables.csv": csv_text(table),
        "sessions.csv": csv_text(sessions),
        "observers.csv": csv_text(pd.DataFrame(batch.observers, columns=OBSERVER_COLUMNS)),
        **{f"plots/{f.name}.svg": f.svg for f in figures},
        **({f"plots/{name}.png": render(figure, name, "png") for name, figure in drawn.items()} if options.png else {}),
    })
    paths = []
    for name, content in written.items():
        (out / name).write_bytes(content.encode() if isinstance(content, str) else content)
        paths.append(out / name)
    pq.write_table(pa.Table.from_pylist(batch.events, schema=EVENT_SCHEMA), out / "events.parquet")
    return paths + [out / "events.parquet"]


def csv_text(frame: pd.DataFrame) -> str:
    return frame.to_csv(index=False, lineterminator="\n")

