"""`spillage replay` and `spillage diff`: re-send a session's requests, and compare two sessions."""

import json
from pathlib import Path

from spillage.proxy.settings import DAMAGED
from spillage.proxy.settings import DEFAULT_RUNS
from spillage.proxy.settings import OK
from spillage.runner.cli.console import print_result
from spillage.runner.cli.console import progress
from spillage.runner.cli.console import spillage_home
from spillage.runner.cli.verbs import Refusal
from spillage.runner.cli.verbs import arg
from spillage.runner.cli.verbs import quiet
from spillage.runner.cli.verbs import require_sessions
from spillage.runner.cli.verbs import verb


@verb("replay", help="re-send a session's recorded requests to fresh origins, into a new session",
      args=[
          arg("session", type=Path, metavar="SESSION"),
          arg("--runs-dir", type=Path, default=DEFAULT_RUNS, help="where the new session goes (default runs/)"),
          quiet("no progress (default: a bar on a terminal, else one line per request sent)"),
      ])
def cmd_replay(args) -> int:
    """Re-send the agent's recorded requests of SESSION, in order, through a freshly started proxy and origins
    serving the session's own catalog; prints the new session folder (docs/REPLAY.md)."""
    from spillage.runner.replay import ReplayError
    from spillage.runner.replay import replay_session

    require_sessions(args.session)
    try:
        result = replay_session(args.session, args.runs_dir, spillage_home(args), progress, bar=not args.quiet)
    except ReplayError as e:
        raise Refusal(str(e)) from None
    print(result.session_dir)
    return OK if result.capture_ok else DAMAGED


@verb("diff", help="compare two sessions' responses and derived actions",
      args=[
          arg("a", type=Path, metavar="A"),
          arg("b", type=Path, metavar="B"),
          arg("--format", choices=["text", "json"], default="text", help="text (default) or json"),
      ])
def cmd_diff(args) -> int:
    """Pair the agent requests of A and B in order by method and URL and compare responses, and the actions and
    events their audits derive; volatile fields (times, cookies, ids) are named, not counted. Exit 0 when
    equal, 1 when not."""
    from spillage.audit.diff import DiffError
    from spillage.audit.diff import diff_sessions
    from spillage.audit.diff import diff_text

    require_sessions(args.a, args.b)
    try:
        result = diff_sessions(args.a, args.b)
    except DiffError as e:
        raise Refusal(str(e)) from None
    return print_result(json.dumps(result, indent=1, ensure_ascii=False) if args.format == "json" else diff_text(result),
                        OK if result["equal"] else DAMAGED)
