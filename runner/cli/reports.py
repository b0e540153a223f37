"""`spillage report` (a batch's tables, plots and comparisons) and `spillage inspect` (one session's
timeline, in the terminal or as a page)."""

import sys
from pathlib import Path

from spillage.reports.options import AUTO
from spillage.reports.options import CONDITIONS
from spillage.reports.options import DEFAULT_SEED
from spillage.reports.options import KEYS
from spillage.reports.options import RESAMPLES
from spillage.proxy.settings import DAMAGED
from spillage.runner.cli.console import spillage_home
from spillage.runner.cli.verbs import Refusal
from spillage.runner.cli.verbs import arg
from spillage.runner.cli.verbs import quiet
from spillage.runner.cli.verbs import session_arg
from spillage.runner.cli.verbs import verb


def grouping_keys(text: str) -> tuple[str, ...]:
    """The keys of `--by KEYS`; () for `auto`."""
    if text == AUTO:
        return ()
    keys = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in keys if k not in KEYS]
    if not keys or unknown:
        raise ValueError(f"--by {text!r}: keys must be among {', '.join(KEYS)}, or auto")
    return keys


def varying_keys(sessions: list[dict], compared: str | None = None) -> tuple[str, ...]:
    """`--by auto`: the conditions (CONDITIONS) that take more than one value among `sessions`, the compared
    key besides; the rates pool over scenarios, sites and styles. None varies: one group, by framework."""
    keys = tuple(k for k in CONDITIONS if k != compared and len({s[k] for s in sessions}) > 1)
    return keys or ("framework",)


@verb("report", help="tables with bootstrap CIs, plots and comparisons over audited sessions (docs/REPORTS.md)",
      args=[
          arg("runs", nargs="+", type=Path, metavar="RUNS", help="session folders or folders of sessions"),
          arg("--out", type=Path, required=True, help="folder for the report files"),
          arg("--by", default=AUTO,
              help=f"grouping keys, comma-separated, among {', '.join(KEYS)}; default auto: those of "
                   f"{', '.join(CONDITIONS)} that vary among the sessions (framework when none does)"),
          arg("--compare", nargs=2, metavar=("KEY=A", "KEY=B"),
              help="compare two values of one key per group, e.g. prompt=original prompt=sanitized"),
          arg("--seed", type=int, default=DEFAULT_SEED,
              help=f"bootstrap seed ({RESAMPLES:,} resamples; default %(default)s)"),
          arg("--include-unverified", action="store_true",
              help="count sessions whose capture failed verification (flagged in the tables)"),
          arg("--keys", type=Path, metavar="FILE",
              help="the keys whose sessions and audits count, one a line (as `spillage key` prints them); "
                   "default: each session's own issuer, whose key must also sign its audit.json"),
          arg("--png", action="store_true", help="also write the plots as PNG (150 dpi, matplotlib)"),
          quiet("no progress bar"),
      ])
def cmd_report(args) -> int:
    """Read the audit.json of every session below RUNS and write report.md, report.html, tables.csv, sessions.csv,
    events.parquet and plots/ into --out."""
    from spillage.reports.batch_report import ReportOptions
    from spillage.reports.batch_report import write_batch_report
    from spillage.reports.sessions import ReportError
    from spillage.reports.sessions import load_batch

    try:
        by = grouping_keys(args.by)
        pins = None
        if args.keys:
            from spillage.runner.cluster import read_pins   # the format of batch's --keys

            pins = read_pins(args.keys)
        batch = load_batch(args.runs, args.include_unverified, bar=not args.quiet, pins=pins)
        chosen = by or varying_keys(batch.sessions, args.compare[0].split("=")[0] if args.compare else None)
        write_batch_report(batch, args.out, ReportOptions(chosen, args.seed, tuple(args.compare or ()) or None, args.png))
    except (ReportError, ValueError) as e:
        raise Refusal(str(e)) from None
    for name, why in batch.excluded:
        print(f"spillage: excluded {name}: {why}", file=sys.stderr)
    grouping = f"grouped by {', '.join(chosen)}" + ("" if by else " (what varies among them; --by KEYS groups otherwise)")
    print(f"spillage: {len(batch.sessions)} sessions reported, {len(batch.excluded)} excluded; {grouping}",
          file=sys.stderr)
    print(args.out / "report.md")
    return 0


@verb("inspect", help="one session's timeline: actions, leaks with the matched text, the records they rest on",
      args=[session_arg("a session folder"),
            arg("--html", type=Path, metavar="FILE", help="write a self-contained HTML page instead")])
def cmd_inspect(args) -> int:
    """Print a session's timeline (chain verification first); --html writes it as one page. Exit 1 when the capture
    fails verification."""
    from spillage.reports.inspect_html import timeline_html
    from spillage.reports.inspect_text import timeline_text
    from spillage.reports.timeline import InspectError
    from spillage.reports.timeline import load_timeline

    try:
        timeline = load_timeline(args.session, spillage_home(args))
    except InspectError as e:
        raise Refusal(str(e)) from None
    if args.html:
        args.html.write_text(timeline_html(timeline), encoding="utf-8")
        print(args.html)
    else:
        print(timeline_text(timeline, colour=sys.stdout.isatty()))
    if not timeline.check.ok:
        raise Refusal(f"the capture does not verify: {timeline.check.summary()}", DAMAGED)
    return 0

