"""Audit many sessions at once: find them, audit each in a worker process, write each audit.json."""

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import as_completed
from dataclasses import dataclass
from pathlib import Path

from spillage.audit.judges import DEFAULT_JUDGE
from spillage.audit.progress import ProgressBar
from spillage.audit.session_audit import AuditError
from spillage.audit.session_audit import audit_session
from spillage.audit.session_audit import write_report
from spillage.proxy.layout import LOG_NAME
from spillage.proxy.layout import sessions_below


@dataclass
class Outcome:
    """What auditing one session gave: its report's summary, or why it could not be audited."""

    session: Path
    summary: dict | None = None
    error: str = ""
    status: int = 0          # the exit status the error stands for (3: the judge cannot be trusted)


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
            below = sessions_below(path)
            if not below:
                raise AuditError(f"{path}: no session folders here or below (a session folder holds {LOG_NAME})")
            found.extend(below)
        else:
            raise AuditError(f"{path}: no such session folder")
    return list(dict.fromkeys(found))


def audit_one(session: Path, judge: str, judge_options: dict, allow_unverified: bool, scenario=None,
              profile_dirs=(), catalog: Path | None = None, home: Path | None = None) -> Outcome:
    """Audit `session` and write its audit.json; never raises for a session that cannot be audited."""
    from spillage.audit.judges import JudgeError
    from spillage.audit.judges import make_judge

    try:
        report = audit_session(session, scenario, allow_unverified, make_judge(judge, **judge_options), profile_dirs,
                               catalog, home)
        write_report(session, report, home)
        return Outcome(session, {**report["summary"], "verified": report["capture"]["verified"]})
    except (AuditError, JudgeError) as e:
        return Outcome(session, error=str(e), status=e.status)


def audit_many(sessions: list[Path], judge: str = DEFAULT_JUDGE, judge_options: dict | None = None, jobs: int = 1,
               allow_unverified: bool = False, scenario=None, bar: bool = True, profile_dirs=(),
               catalog: Path | None = None, home: Path | None = None) -> list[Outcome]:
    """Audit every session (in `jobs` worker processes), writing each audit.json; outcomes in input order.
    `catalog`, when given, is the catalog every session's sites served; else each session's is found
    in the catalog store of the spillage `home`."""
    judge_options = judge_options or {}
    outcomes: dict[Path, Outcome] = {}
    with ProgressBar(len(sessions), terminal=bar, lines=bar) as progress:
        if jobs <= 1:
            for session in sessions:
                outcomes[session] = audit_one(session, judge, judge_options, allow_unverified, scenario,
                                              profile_dirs, catalog, home)
                progress.step()
        else:
            # forkserver: forking this process, whose progress bar and pool run threads, could deadlock a worker
            with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("forkserver")) as pool:
                futures = [pool.submit(audit_one, s, judge, judge_options, allow_unverified, scenario, profile_dirs,
                                       catalog, home) for s in sessions]
                for future in as_completed(futures):
                    outcome = future.result()
                    outcomes[outcome.session] = outcome
                    progress.step()
    return [outcomes[s] for s in sessions]
