"""`spillage audit RUNS --scheduler tcp://HOST:PORT`: audit sessions on Dask workers (docs/CLUSTER.md).

Each session folder travels to a worker in the archive a cell's session comes back in (`pack`: a
gzipped tar and each file's SHA-256); the worker unpacks it, checks every file against its hash,
audits it with its own catalog store (the catalog found by hash, or rebuilt from its seed and checked),
and sends the report back; the client writes it as the session's audit.json. The worker audits the
bytes the client holds, so the report's verdict (`capture.verified`, its head) is of the log here.
At most WINDOW sessions per worker thread are in flight, so memory stays bounded on the client.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from spillage.audit.batch import Outcome
from spillage.audit.progress import ProgressBar
from spillage.audit.session_audit import write_report
from spillage.proxy.layout import make_private_dir
from spillage.runner.cluster import ArrivalError
from spillage.runner.cluster import pack
from spillage.runner.cluster import remove_tree
from spillage.runner.cluster import unpack
from spillage.runner.cluster import worker_home

AUDITS = "audits"   # <worker's home>/audits/<session>.<random>/: where a worker audits a session
WINDOW = 4          # sessions in flight per worker thread


@dataclass(frozen=True)
class AuditTask:
    """One session to audit on a worker: its archive and how to judge it."""

    name: str
    archive: bytes
    files: dict[str, str]
    judge: str
    judge_options: dict
    allow_unverified: bool


def audit_remote(task: AuditTask) -> tuple[dict | None, str]:
    """On a worker: (the audit report, "") of the session in `task`, or (None, why it could not be)."""
    from spillage.audit.judges import JudgeError
    from spillage.audit.judges import make_judge
    from spillage.audit.session_audit import AuditError
    from spillage.audit.session_audit import audit_session

    home = worker_home()
    make_private_dir(home, exist_ok=True)   # a worker that has run no cell yet has no home
    staging = Path(tempfile.mkdtemp(prefix=f"{task.name}.", dir=make_private_dir(home / AUDITS, exist_ok=True)))
    try:
        session = staging / task.name
        unpack(task.archive, session, task.files)
        judge = make_judge(task.judge, **task.judge_options)
        return audit_session(session, None, task.allow_unverified, judge, home=home), ""
    except (AuditError, JudgeError, ArrivalError) as e:
        return None, str(e)
    finally:
        remove_tree(staging)


def audit_on_cluster(client, sessions: list[Path], judge: str, judge_options: dict, allow_unverified: bool,
                     bar: bool = True, home: Path | None = None) -> list[Outcome]:
    """Audit every session on the cluster of `client`, writing each audit.json here, signed with the key of
    the spillage `home`; outcomes in input order."""
    from distributed import as_completed

    threads = sum(client.nthreads().values()) or 1
    pending = iter(sessions)
    outcomes: dict[Path, Outcome] = {}
    of: dict[str, Path] = {}   # future key → its session

    def submit(session: Path):
        try:
            archive, files = pack(session)
        except (ArrivalError, OSError) as e:
            outcomes[session] = Outcome(session, error=f"cannot send it: {e}")
            return None
        task = AuditTask(session.name, archive, files, judge, judge_options, allow_unverified)
        future = client.submit(audit_remote, task, key=f"audit-{len(of)}-{session.name}", pure=False)
        of[future.key] = session
        return future

    with ProgressBar(len(sessions), what="audit on the cluster", terminal=bar, lines=bar) as progress:
        running = as_completed(loop=client.loop)
        for session in pending:
            if (future := submit(session)) is not None:
                running.add(future)
            else:
                progress.step()
            if running.count() >= WINDOW * threads:
                break
        for future in running:
            session = of.pop(future.key)
            try:
                report, error = future.result()
            except Exception as e:  # noqa: BLE001 - a worker lost or a task that raised: that session fails
                report, error = None, f"on the cluster: {type(e).__name__}: {e}"
            if report is not None:
                write_report(session, report, home)
                outcomes[session] = Outcome(session, {**report["summary"], "verified": report["capture"]["verified"]})
            else:
                outcomes[session] = Outcome(session, error=error)
            progress.step()
            for session in pending:   # one out, one in
                if (future := submit(session)) is not None:
                    running.add(future)
                    break
                progress.step()
    return [outcomes[s] for s in sessions]
