"""`spillage inspect SESSION`: the session's timeline for a terminal, chain verification first.

Matched text is highlighted: bold red on a terminal, between »« otherwise. Control characters
in captured strings are shown escaped, so a capture cannot drive the terminal."""

import unicodedata

from spillage.reports.timeline import Timeline
from spillage.reports.timeline import chain_status
from spillage.reports.timeline import excerpt
from spillage.reports.timeline import match_spans
from spillage.reports.timeline import sent_strings

SHOW = 160  # characters of a sent string shown around its first match
UNPRINTABLE = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}
CATEGORY_COLOURS = {"C_E": "31", "C_I": "35", "B_E": "34", "B_I": "36"}


class Style:
    """ANSI styling, or plain markers when colour is off."""

    def __init__(self, colour: bool):
        self.colour = colour

    def paint(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.colour else text

    def match(self, text: str) -> str:
        return self.paint(text, "1;31") if self.colour else f"»{text}«"


def printable(text: str) -> str:
    """`text` with control and format characters (escape, newline, …) shown as \\x.. escapes."""
    return "".join(f"\\x{ord(ch):02x}" if unicodedata.category(ch) in UNPRINTABLE else ch for ch in text)


def highlight(text: str, matches: list[str], style: Style) -> str:
    """An excerpt of `text`, printable, with every case-insensitive occurrence of `matches` highlighted."""
    return "".join(style.match(printable(piece)) if hit else printable(piece)
                   for piece, hit in match_spans(excerpt(text, matches, SHOW), matches))


def seq_ranges(seqs: list[int]) -> str:
    """'36-52, 69, 73' for [36, 37, …, 52, 69, 73]."""
    parts, run = [], []
    for seq in sorted(set(seqs)):
        if run and seq == run[-1] + 1:
            run.append(seq)
        else:
            run and parts.append(run)
            run = [seq]
    run and parts.append(run)
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in parts)


def header_lines(timeline: Timeline, style: Style) -> list[str]:
    audit, (ok, said) = timeline.audit, chain_status(timeline.check)
    status = style.paint("chain OK", "1;32") if ok else style.paint("chain FAILED", "1;31")
    summary = audit["summary"]
    occurrences = ", ".join(f"{c} {n}" for c, n in summary["occurrences"].items())
    return [
        f"{status}: {printable(said)}",
        f"session {printable(audit['session'])}  scenario {printable(audit['scenario'])}  site {audit['site']}  "
        f"judge {audit['judge']}  ({timeline.audit_source})",
        f"actions {summary['actions']}  events {sum(summary['occurrences'].values())} ({occurrences})  "
        f"OR {summary['oversharing_rate']}  task {'succeeded' if summary['task_success'] else 'not completed'}",
        *(f"observer {printable(o['observer'])}  {o['domain']}  {o['party']}  {o['organisation'] or '-'}  received "
          f"{', '.join(o['received']['attributes']) or '-'}" for o in audit.get("observers") or ()),
        "",
    ]


def action_lines(timeline: Timeline, action: dict, style: Style) -> list[str]:
    events = timeline.events_of(action["n"])
    matches = [e["matched"] for e in events]
    seconds = timeline.seconds(action["seq"])
    when = f"+{seconds:.1f}s" if seconds is not None else "?"
    lines = [f"{when:>9}  #{action['n']:<3} {action['kind'] + '/' + action['what']:<20} {action['channel']:<10} "
             f"{printable(', '.join(action['observers']))}"]
    for label, value in sent_strings(action):
        lines.append(f"{'':12}{label}: {highlight(value, matches, style)}")
    for e in events:
        category = style.paint(e["category"], "1;" + CATEGORY_COLOURS[e["category"]])
        lines.append(f"{'':12}{category} {printable(e['attribute'])}: matched {style.match(printable(e['matched']))}"
                     f"  observers {printable(', '.join(e['observers']))}  seq {e['seq']}")
    lines.append(f"{'':12}seqs {seq_ranges(action['evidence'])}")
    return lines


def timeline_text(timeline: Timeline, colour: bool = False) -> str:
    """The whole timeline as terminal text."""
    style = Style(colour)
    lines = header_lines(timeline, style)
    for action in timeline.audit["actions"]:
        lines += action_lines(timeline, action, style)
    return "\n".join(lines)
