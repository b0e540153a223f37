"""The batch report as a list of blocks (headings, paragraphs, tables, lists, figures), rendered to
Markdown and to one self-contained HTML page from the same blocks, so both always say the same."""

import math
import re
from dataclasses import dataclass
from html import escape

import pandas as pd

from spillage.audit.model import CATEGORIES
from spillage.reports.stats import LEVEL
from spillage.reports.stats import METRICS
from spillage.reports.options import RESAMPLES

RATE_TABLE = ("or_C_E", "or_C_I", "or_B_E", "or_B_I", "or_all", "behavioral_content")
OUTCOME_TABLE = ("task_success", "recovery", "recovery_first_party", "recovery_third_party")
ATTEMPT_TABLE = ("attempted_or_all", "or_all")
LABELS = {m.name: m.label for m in METRICS}
UNVERIFIED = "†"


@dataclass
class Heading:
    text: str


@dataclass
class Paragraph:
    text: str


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Figure:
    name: str
    title: str
    svg: str  # the whole SVG file

    def svg_element(self) -> str:
        """The <svg> element alone, without the file's XML declaration and doctype, for a page."""
        return self.svg[self.svg.index("<svg"):]


def number(value: float) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


def with_ci(value: float, low: float, high: float) -> str:
    """'0.200 [0.133, 0.267]', or the value alone with '[no CI]' (the reason is in the notes)."""
    if math.isnan(value):
        return "n/a"
    if math.isnan(low):
        return f"{number(value)} [no CI]"
    return f"{number(value)} [{number(low)}, {number(high)}]"


def sessions_cell(row) -> str:
    return f"{row['sessions']} ({row['unverified']}{UNVERIFIED})" if row["unverified"] else str(row["sessions"])


def group_tables(table: pd.DataFrame, by: tuple[str, ...]) -> list:
    """The two tables of the paper's shape, and the notes on CIs that could not be computed."""
    rates = Table([*by, "sessions", "actions", *CATEGORIES, *(LABELS[m] for m in RATE_TABLE)], [])
    outcomes = Table([*by, "sessions", *(LABELS[m] for m in OUTCOME_TABLE)], [])
    notes = []
    for _, row in table.iterrows():
        keys = [str(row[k]) for k in by]
        rates.rows.append([*keys, sessions_cell(row), str(row["actions"]), *(str(row[c]) for c in CATEGORIES),
                           *(with_ci(row[m], row[f"{m}_low"], row[f"{m}_high"]) for m in RATE_TABLE)])
        outcomes.rows.append([*keys, sessions_cell(row),
                              *(with_ci(row[m], row[f"{m}_low"], row[f"{m}_high"]) for m in OUTCOME_TABLE)])
        reasons = {}
        for m in METRICS:
            if row[f"{m.name}_note"]:
                reasons.setdefault(row[f"{m.name}_note"], []).append(m.label)
        notes += [f"{' / '.join(keys)}: {'all rates' if len(labels) == len(METRICS) else ', '.join(labels)}: {why}"
                  for why, labels in reasons.items()]
    return [Heading("Occurrences and oversharing rates"), rates,
            Heading("Task success and recoveries"), outcomes,
            *(attempt_blocks(table, by) if "guard" in by or table["interventions"].sum() else []),
            *([Paragraph("Rates without a CI:"), Bullets(notes)] if notes else [])]


def attempt_blocks(table: pd.DataFrame, by: tuple[str, ...]) -> list:
    """What the agents attempted against what the observers received, where a guard stood between."""
    attempted = [f"attempted_{c}" for c in CATEGORIES]
    rows = Table([*by, "sessions", "interventions", "attempted actions", *(f"attempted {c}" for c in CATEGORIES),
                  *(LABELS[m] for m in ATTEMPT_TABLE)], [])
    for _, row in table.iterrows():
        rows.rows.append([*(str(row[k]) for k in by), sessions_cell(row), str(row["interventions"]),
                          str(row["attempted_actions"]), *(str(row[c]) for c in attempted),
                          *(with_ci(row[m], row[f"{m}_low"], row[f"{m}_high"]) for m in ATTEMPT_TABLE)])
    return [Heading("Attempted and delivered"),
            Paragraph("What the agents tried to send, before the guard on the wire (docs/GUARD.md), against "
                      "what the sites and trackers received; the rates above are the delivered ones."), rows]


def compare_blocks(compared: pd.DataFrame, a: str, b: str, by: tuple[str, ...], lonely: str) -> list:
    """Per group: each metric under A and B, B − A and the CI of the difference."""
    blocks = [Heading(f"Comparison: {a} against {b}"),
              Paragraph(f"Difference is {b} minus {a}; its {LEVEL:.0%} CI resamples the sessions of each "
                        f"side separately.")]
    if compared.empty:
        return blocks + [Paragraph(f"No group has sessions on both sides: {lonely}.")]
    keys = [k for k in by if k in compared.columns]
    for values, group in (compared.groupby(keys, sort=True) if keys else [((), compared)]):
        values = values if isinstance(values, tuple) else (values,)
        first = group.iloc[0]
        blocks.append(Paragraph(f"**{' / '.join(map(str, values)) or 'all sessions'}** "
                                f"({first['sessions_a']} against {first['sessions_b']} sessions)"))
        blocks.append(Table(["metric", a, b, "difference", f"{LEVEL:.0%} CI"], [
            [LABELS[r["metric"]], number(r["a"]), number(r["b"]), number(r["difference"]),
             r["note"] or (f"[{number(r['difference_low'])}, {number(r['difference_high'])}]"
                           if not math.isnan(r["difference"]) else "n/a")]
            for _, r in group.iterrows()]))
    if lonely:
        blocks.append(Paragraph(f"Not compared (on one side only): {lonely}."))
    return blocks


def method_paragraph(sessions: int, excluded: int, by: tuple[str, ...], seed: int, unverified: int,
                     imported: int = 0, incomplete: int = 0) -> Paragraph:
    flagged = (f" {UNVERIFIED} marks sessions whose capture failed verification, included on request; "
               f"their audits cover only the records before the damage ({unverified} such sessions).") if unverified else ""
    flagged += (f" {imported} of the sessions were imported from capture files (`spillage import`): their "
                "chains vouch for the import, not for the original capture (framework `imported`).") if imported else ""
    flagged += (f" {incomplete} of them come from files that lack part of the traffic (omitted bodies, beacons "
                "sent on page exit; `provenance.lacks` in each audit.json): their rates may be low.") if incomplete else ""
    return Paragraph(
        f"{sessions} sessions, {excluded} excluded (listed below). Grouped by {', '.join(by)}. "
        f"Each rate is a pooled ratio over the group's sessions (OR = occurrences / actions; "
        f"behavioral:content = (B_E + B_I) / (C_E + C_I) occurrences; task success = successful sessions / "
        f"sessions; recovery = recovered irrelevant attributes / irrelevant attributes). Brackets: {LEVEL:.0%} "
        f"percentile bootstrap CI, {RESAMPLES:,} resamples of sessions, seed {seed}; a CI of [v, v] means every "
        f"resample gave the same value (the sessions do not vary)." + flagged)


def observer_blocks(observers: list[dict]) -> list:
    """Who observed the sessions, by organisation (or domain, for one the tracker list does not name):
    its party, in how many sessions, in how many of those it received an irrelevant attribute, and which."""
    by: dict[tuple[str, str], dict] = {}
    for o in observers:
        seen = by.setdefault((o["organisation"] or o["domain"], o["party"]), {"sessions": set(), "received": set(),
                                                                               "attributes": set()})
        seen["sessions"].add(o["session"])
        if o["attributes"]:
            seen["received"].add(o["session"])
            seen["attributes"].update(o["attributes"].split())
    rows = [[who, party, str(len(v["sessions"])), str(len(v["received"])), ", ".join(sorted(v["attributes"])) or "-"]
            for (who, party), v in sorted(by.items(), key=lambda item: (-len(item[1]["received"]), item[0]))]
    return [Heading("Observers"), Table(["organisation or domain", "party", "sessions", "received an attribute in",
                                         "attributes"], rows)] if rows else []


def excluded_blocks(excluded: list[tuple[str, str]]) -> list:
    items = [f"{name}: {why}" for name, why in excluded] or ["none"]
    return [Heading("Excluded sessions"), Bullets(items)]


def to_markdown(title: str, blocks: list, figure_suffix: str = ".svg") -> str:
    """The blocks as Markdown; figures link to plots/<name><figure_suffix> beside the report."""
    lines = [f"# {title}", ""]
    for block in blocks:
        if isinstance(block, Heading):
            lines += [f"## {block.text}", ""]
        elif isinstance(block, Paragraph):
            lines += [block.text, ""]
        elif isinstance(block, Bullets):
            lines += [f"- {md_cell(item)}" for item in block.items] + [""]
        elif isinstance(block, Table):
            lines.append("| " + " | ".join(map(md_cell, block.header)) + " |")
            lines.append("|" + "---|" * len(block.header))
            lines += ["| " + " | ".join(map(md_cell, row)) + " |" for row in block.rows]
            lines.append("")
        elif isinstance(block, Figure):
            lines += [f"![{block.title}](plots/{block.name}{figure_suffix})", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


STYLE = """body{font-family:sans-serif;margin:2em;max-width:90em;color:#222;overflow-wrap:anywhere}
.table{overflow-x:auto;margin:.5em 0 1.5em}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:left;vertical-align:top;overflow-wrap:normal}
th{background:#f4f4f4}td{white-space:nowrap}td.num{white-space:normal}.num{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:1em 0}figcaption{font-weight:bold;margin-bottom:.3em}
svg{max-width:100%;height:auto}"""
NUMBER = re.compile(r"n/a|-?\d[\d.]*( \[no CI\]| \[-?[\d.]+, -?[\d.]+\]| \(\d+†\))?")


def numeric_columns(table: Table) -> list[bool]:
    """Per column, whether every cell is a number (with its CI): those align right, text aligns left."""
    return [all(NUMBER.fullmatch(row[i]) for row in table.rows) for i in range(len(table.header))]


def table_html(table: Table) -> str:
    """A table in its own box, which scrolls when the table is wider than the page; a value and its CI
    part only between them, so a narrow page wraps a rate onto two lines, not inside its CI."""
    numeric = numeric_columns(table)

    def cell(tag: str, text: str, is_number: bool) -> str:
        shown = escape(text).replace(", ", ",&nbsp;") if is_number else escape(text)
        return f"<{tag} class='num'>{shown}</{tag}>" if is_number else f"<{tag}>{shown}</{tag}>"

    return ("<div class='table'><table><tr>" + "".join(cell("th", h, n) for h, n in zip(table.header, numeric))
            + "</tr>" + "".join("<tr>" + "".join(cell("td", c, n) for c, n in zip(row, numeric)) + "</tr>"
                                for row in table.rows) + "</table></div>")


def to_html(title: str, blocks: list) -> str:
    """The blocks as one self-contained HTML page: inline CSS and SVG, no script, no external reference."""
    parts = [f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{escape(title)}</title>"
             f"<style>{STYLE}</style></head><body><h1>{escape(title)}</h1>"]
    for block in blocks:
        if isinstance(block, Heading):
            parts.append(f"<h2>{escape(block.text)}</h2>")
        elif isinstance(block, Paragraph):
            parts.append(f"<p>{bold(escape(block.text))}</p>")
        elif isinstance(block, Bullets):
            parts.append("<ul>" + "".join(f"<li>{escape(i)}</li>" for i in block.items) + "</ul>")
        elif isinstance(block, Table):
            parts.append(table_html(block))
        elif isinstance(block, Figure):
            parts.append(f"<figure><figcaption>{escape(block.title)}</figcaption>{block.svg_element()}</figure>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def bold(escaped: str) -> str:
    """Markdown's **strong** in an already escaped paragraph."""
    pieces = escaped.split("**")
    return "".join(f"<strong>{p}</strong>" if i % 2 else p for i, p in enumerate(pieces))
