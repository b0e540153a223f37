"""Audit many sessions at once: find them, audit each in a worker process, write each audit.json."""

import sys
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import as_completed
from dataclasses import dataclass
from pathlib import Path

from spillage.audit.session_audit import AuditError
from spillage.audit.session_audit import audit_session
from spillage.audit.session_audit import write_report
from spillage.proxy.layout import LOG_NAME
from spillage.proxy.layout import sessions_below

BAR = 24


@dataclass
class Outcome:
    """What auditing one session gave: its report's summary, or why it could not be audited."""

    session: Path
    summary: dict | None = None
    error: str = ""


def find_sessions(paths: list[Path]) -> list[Path]:
    """Session folders named by `paths`: a folder holding a capture log, or every such folder below one
    (not in hidden folders such as agents' `.work/`)."""
    found = []
    for path in paths:
        path = Path(path)
        if path.name == LOG_NAME:
            path = path.parent
        if (path / LOG_NAME).is_file():
            found.append(path)
        elif path.is_dir():
            found.extend(sessions_below(path))
        else:
            raise AuditError(f"{path}: no such session folder")
    return list(dict.fromkeys(found))


def audit_one(session: Path, judge: str, judge_options: dict, allow_unverified: bool, scenario=None,
              profile_dirs=(), catalog: Path | None = None) -> Outcome:
    """Audit `session` and write its audit.json; never raises for a session that cannot be audited."""
    from spillage.audit.judges import JudgeError
    from spillage.audit.judges import make_judge

    try:
        report = audit_session(session, scenario, allow_unverified, make_judge(judge, **judge_options), profile_dirs,
                               catalog)
        write_report(session, report)
        return Outcome(session, {**report["summary"], "verified": report["capture"]["verified"]})
    except (AuditError, JudgeError) as e:
        return Outcome(session, error=str(e))


class ProgressBar:
    """`[#####-----] 12/40 sessions, 3 s, ETA 6 s` on stderr, redrawn in place; `what` names the work.
    With `redraw=False` (a log file, CI) each step is a line of its own: `[12/40] note; 3 s, ETA 6 s`."""

    def __init__(self, total: int, stream=None, what: str = "audit", unit: str = "sessions", redraw: bool = True):
        self.total, self.done, self.stream = total, 0, stream or sys.stderr  # stderr as it is now, not at import
        self.what, self.unit, self.redraw = what, unit, redraw
        self.began = time.monotonic()

    def eta(self) -> float:
        """Seconds left at the pace so far."""
        return (time.monotonic() - self.began) / max(self.done, 1) * (self.total - self.done)

    def step(self, note: str = "") -> None:
        self.done += 1
        elapsed = time.monotonic() - self.began
        if not self.redraw:
            print(f"spillage: {self.what} [{self.done}/{self.total}] {note}; {elapsed:.0f} s, ETA {self.eta():.0f} s",
                  file=self.stream, flush=True)
            return
        filled = round(BAR * self.done / self.total)
        end = "\n" if self.done == self.total else ""
        print(f"\rspillage: {self.what} [{'#' * filled}{'-' * (BAR - filled)}] {self.done}/{self.total} "
              f"{self.unit}, {elapsed:.0f} s, ETA {self.eta():.0f} s {note}", end=end, file=self.stream, flush=True)


def audit_many(sessions: list[Path], judge: str = "lexical", judge_options: dict | None = None, jobs: int = 1,
               allow_unverified: bool = False, scenario=None, bar: bool = True, profile_dirs=(),
               catalog: Path | None = None) -> list[Outcome]:
    """Audit every session (in `jobs` worker processes), writing each audit.json; outcomes in input order.
    `catalog`, when given, is the catalog every session's sites served."""
    judge_options = judge_options or {}
    progress = ProgressBar(len(sessions)) if bar and sessions else None
    outcomes: dict[Path, Outcome] = {}
    if jobs <= 1:
        for session in sessions:
            outcomes[session] = audit_one(session, judge, judge_options, allow_unverified, scenario, profile_dirs,
                                          catalog)
            progress and progress.step()
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(audit_one, s, judge, judge_options, allow_unverified, scenario, profile_dirs,
                                   catalog) for s in sessions]
            for future in as_completed(futures):
                outcome = future.result()
                outcomes[outcome.session] = outcome
                progress and progress.step()
    return [outcomes[s] for s in sessions]
