"""`spillage replay` and `spillage diff`: re-send a session's requests, and compare two sessions."""

import json
from pathlib import Path

from spillage.proxy.layout import LOG_NAME


def cmd_replay(args) -> int:
    from spillage.runner.console import progress
    from spillage.runner.console import spillage_home
    from spillage.runner.replay import ReplayError
    from spillage.runner.replay import replay_session

    if not (args.session / LOG_NAME).is_file():
        progress(f"{args.session}: no {LOG_NAME} here; is this a session folder?")
        return 2
    try:
        result = replay_session(args.session, args.runs_dir, spillage_home(args), progress, bar=not args.quiet)
    except ReplayError as e:
        progress(str(e))
        return 2
    print(result.session_dir)
    return 0 if result.capture_ok else 1


def cmd_diff(args) -> int:
    from spillage.audit.diff import DiffError
    from spillage.audit.diff import diff_sessions
    from spillage.audit.diff import diff_text
    from spillage.runner.console import progress
    from spillage.runner.console import print_result

    for session in (args.a, args.b):
        if not (session / LOG_NAME).is_file():
            progress(f"{session}: no {LOG_NAME} here; is this a session folder?")
            return 2
    try:
        result = diff_sessions(args.a, args.b)
    except DiffError as e:
        progress(str(e))
        return 2
    return print_result(json.dumps(result, indent=1, ensure_ascii=False) if args.format == "json" else diff_text(result),
                        0 if result["equal"] else 1)


def add_commands(sub) -> None:
    """Add `replay` and `diff` to the `spillage` parser's subparsers `sub`."""
    from spillage.runner.console import DEFAULT_RUNS

    replay = sub.add_parser("replay", help="re-send a session's recorded requests to fresh origins, into a new session",
                            description="Re-send the agent's recorded requests of SESSION, in order, through a "
                                        "freshly started proxy and origins serving the session's own catalog; "
                                        "prints the new session folder (docs/REPLAY.md).")
    replay.add_argument("session", type=Path, metavar="SESSION")
    replay.add_argument("--runs-dir", type=Path, default=DEFAULT_RUNS,
                        help="where the new session goes (default runs/)")
    replay.add_argument("--quiet", action="store_true",
                        help="no progress (default: a bar on a terminal, else one line per request sent)")
    replay.set_defaults(func=cmd_replay)

    diff = sub.add_parser("diff", help="compare two sessions' responses and derived actions",
                          description="Pair the agent requests of A and B in order by method and URL and compare "
                                      "responses, and the actions and events their audits derive; volatile fields "
                                      "(times, cookies, ids) are named, not counted. Exit 0 when equal, 1 when not.")
    diff.add_argument("a", type=Path, metavar="A")
    diff.add_argument("b", type=Path, metavar="B")
    diff.add_argument("--format", choices=["text", "json"], default="text", help="text (default) or json")
    diff.set_defaults(func=cmd_diff)
