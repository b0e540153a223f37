"""`spillage report` (a batch's tables, plots and comparisons) and `spillage inspect` (one session's
timeline, in the terminal or as a page)."""

import sys
from pathlib import Path

from spillage.reports.options import AUTO
from spillage.reports.options import CONDITIONS
from spillage.reports.options import DEFAULT_SEED
from spillage.reports.options import KEYS
from spillage.reports.options import RESAMPLES
from spillage.runner.console import fail
from spillage.runner.console import spillage_home


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


def cmd_report(args) -> int:
    from spillage.reports.batch_report import ReportOptions
    from spillage.reports.batch_report import write_batch_report
    from spillage.reports.sessions import ReportError
    from spillage.reports.sessions import load_batch

    try:
        by = grouping_keys(args.by)
        batch = load_batch(args.runs, args.include_unverified, bar=not args.quiet)
        chosen = by or varying_keys(batch.sessions, args.compare[0].split("=")[0] if args.compare else None)
        write_batch_report(batch, args.out, ReportOptions(chosen, args.seed, tuple(args.compare or ()) or None, args.png))
    except (ReportError, ValueError) as e:
        return fail(str(e))
    for name, why in batch.excluded:
        print(f"spillage: excluded {name}: {why}", file=sys.stderr)
    grouping = f"grouped by {', '.join(chosen)}" + ("" if by else " (what varies among them; --by KEYS groups otherwise)")
    print(f"spillage: {len(batch.sessions)} sessions reported, {len(batch.excluded)} excluded; {grouping}",
          file=sys.stderr)
    print(args.out / "report.md")
    return 0


def cmd_inspect(args) -> int:
    from spillage.reports.inspect_html import timeline_html
    from spillage.reports.inspect_text import timeline_text
    from spillage.reports.timeline import InspectError
    from spillage.reports.timeline import load_timeline

    try:
        timeline = load_timeline(args.session, spillage_home(args))
    except InspectError as e:
        return fail(str(e))
    if args.html:
        args.html.write_text(timeline_html(timeline), encoding="utf-8")
        print(args.html)
    else:
        print(timeline_text(timeline, colour=sys.stdout.isatty()))
    if not timeline.check.ok:
        return fail(f"the capture does not verify: {timeline.check.summary()}", 1)
    return 0


def add_commands(sub) -> None:
    """Add `report` and `inspect` to the `spillage` parser's subparsers `sub`."""
    report = sub.add_parser(
        "report", help="tables with bootstrap CIs, plots and comparisons over audited sessions (docs/REPORTS.md)",
        description="Read the audit.json of every session below RUNS and write report.md, report.html, "
                    "tables.csv, sessions.csv, events.parquet and plots/ into --out.")
    report.add_argument("runs", nargs="+", type=Path, metavar="RUNS", help="session folders or folders of sessions")
    report.add_argument("--out", type=Path, required=True, help="folder for the report files")
    report.add_argument("--by", default=AUTO,
                        help=f"grouping keys, comma-separated, among {', '.join(KEYS)}; default auto: those of "
                             f"{', '.join(CONDITIONS)} that vary among the sessions (framework when none does)")
    report.add_argument("--compare", nargs=2, metavar=("KEY=A", "KEY=B"),
                        help="compare two values of one key per group, e.g. prompt=original prompt=sanitized")
    report.add_argument("--seed", type=int, default=DEFAULT_SEED,
                        help=f"bootstrap seed ({RESAMPLES:,} resamples; default %(default)s)")
    report.add_argument("--include-unverified", action="store_true",
                        help="count sessions whose capture failed verification (flagged in the tables)")
    report.add_argument("--png", action="store_true", help="also write the plots as PNG (150 dpi, matplotlib)")
    report.add_argument("--quiet", action="store_true", help="no progress bar")
    report.set_defaults(func=cmd_report)

    inspect = sub.add_parser(
        "inspect", help="one session's timeline: actions, leaks with the matched text, the records they rest on",
        description="Print a session's timeline (chain verification first); --html writes it as one page. "
                    "Exit 1 when the capture fails verification.")
    inspect.add_argument("session", type=Path, help="a session folder")
    inspect.add_argument("--html", type=Path, metavar="FILE", help="write a self-contained HTML page instead")
    inspect.set_defaults(func=cmd_inspect)
