"""Run a matrix: every cell is one `spillage run` child process, `jobs` at a time.

Layout of a batch folder:

    RUNS_DIR/
      batch.jsonl       the ledger: one line per finished attempt (append-only, fsynced)
      sessions/<key>/   one sealed, audited session per cell of the matrix
      attempts/         sessions of earlier attempts (interrupted, or failed and retried): <key>.<n>/<key>/
      logs/<key>.log    each child's output

Running the same batch again resumes it: a cell whose last outcome is `done` is skipped, a failed
or timed-out one is skipped unless `retry_failed`, an interrupted or never-run one runs. Ctrl-C is
passed on to every running child, which stops its agent and seals its session; the batch then
records them as interrupted and stops launching. One batch at a time holds a folder (`batch.lock`).

The cells run here, as children of this process; `runner/cluster.py` runs them on Dask workers instead,
with the same ledger and folder.
"""

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from spillage.audit.progress import ProgressBar
from spillage.addons.mitm.ca import ensure_ca
from spillage.proxy.signing import load_or_create_key
from spillage.proxy.capturelog import utc_timestamp
from spillage.proxy.layout import META_NAME
from spillage.proxy.layout import REPORT_NAME
from spillage.proxy.layout import read_meta
from spillage.proxy.settings import AGENT_FAILED
from spillage.proxy.settings import DAMAGED
from spillage.proxy.settings import OK
from spillage.runner.matrix import Matrix
from spillage.runner.matrix import RunSpec
from spillage.runner.supervisor import Supervisor

LEDGER = "batch.jsonl"
LOCK = "batch.lock"
OUTCOMES = ("done", "failed", "timed out", "interrupted")
SETUP_SECONDS = 180  # beyond the agent's timeout: building the catalog, starting servers, the audit
SEAL_SECONDS = 60    # how long an interrupted child gets to stop its agent and seal its session


@dataclass(frozen=True)
class Attempt:
    """How one run of a cell ended."""

    key: str
    outcome: str  # one of OUTCOMES
    reason: str
    session: str
    seconds: float
    worker: str = ""  # the Dask worker that ran it (a cluster batch)
    signer: str = ""  # the fingerprint of the long-term key that signed its capture (a cluster batch)


class BatchLocked(RuntimeError):
    """Another batch holds the folder; str() is one line."""


class BatchLock:
    """`batch.lock` in a batch folder, held (flock) while a batch runs there: a second one is refused."""

    def __init__(self, runs_dir: Path):
        self.path = runs_dir / LOCK
        self.file = None

    def __enter__(self) -> "BatchLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(self.path, "a+", encoding="utf-8")
        try:
            fcntl.flock(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.file.seek(0)
            holder = self.file.read().strip() or "another process"
            self.file.close()
            raise BatchLocked(f"{self.path.parent}: another batch is running on this folder ({holder}); "
                              "wait for it or stop it first") from None
        self.file.truncate(0)
        self.file.write(f"pid {os.getpid()} on {os.uname().nodename}\n")
        self.file.flush()
        return self

    def __exit__(self, *exc) -> None:
        self.file.close()  # closing releases the lock; the file stays, so no one races to re-create it


class Ledger:
    """`batch.jsonl`: the outcome of every attempt, in order; the last line per key is its state."""

    def __init__(self, path: Path):
        self.path = path

    def states(self) -> dict[str, dict]:
        """The last recorded attempt of each key (a torn last line, from a crash mid-write, is ignored)."""
        last: dict[str, dict] = {}
        if not self.path.exists():
            return last
        with open(self.path, encoding="utf-8") as f:
            for line in f:
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(entry, dict) and entry.get("key"):
                    last[entry["key"]] = entry
        return last

    def record(self, attempt: Attempt) -> None:
        entry = {"key": attempt.key, "outcome": attempt.outcome, "reason": attempt.reason,
                 "session": attempt.session, "seconds": round(attempt.seconds, 1), "ts": utc_timestamp()}
        entry |= {name: value for name in ("worker", "signer") if (value := getattr(attempt, name))}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())


class TimedRun(Supervisor):
    """A `spillage run` child (runner/supervisor.py), writing into `log`. Past `seconds` it is asked to stop
    (SIGINT, as Ctrl-C would: it stops its agent and seals its session) and SEAL_SECONDS later killed."""

    def __init__(self, argv: list[str], log, seconds: float):
        super().__init__(argv, stdout=log, stderr=subprocess.STDOUT)
        self.began = time.monotonic()
        self.deadline = self.began + seconds
        self.signalled = False

    def ended(self) -> bool:
        """Whether the child has ended; one past its deadline is asked to stop, then killed."""
        if self.poll() is not None:
            return True
        now = time.monotonic()
        if now > self.deadline and not self.signalled:
            self.interrupt()
        elif now > self.deadline:
            self.signal(signal.SIGKILL)
            self.wait()
            return True
        return False

    def interrupt(self) -> None:
        """Ask the child (once) to stop its agent and seal its session."""
        if not self.signalled and self.poll() is None:
            self.signalled = True
            self.signal(signal.SIGINT, group=False)
            self.deadline = time.monotonic() + SEAL_SECONDS


@dataclass
class Job:
    """A running `spillage run` child for one cell."""

    run: RunSpec
    child: TimedRun
    log: object


class Batch:
    """Runs `matrix` into `runs_dir` with `jobs` children at a time (see the module's docstring)."""

    def __init__(self, matrix: Matrix, runs_dir: Path, home: Path, jobs: int = 1,
                 retry_failed: bool = False, audit: bool = True, progress=print, bar: bool = False):
        self.matrix, self.jobs, self.retry_failed, self.audit = matrix, max(1, jobs), retry_failed, audit
        self.runs_dir, self.home = runs_dir.resolve(), home
        self.sessions, self.attempts, self.logs = (self.runs_dir / n for n in ("sessions", "attempts", "logs"))
        self.ledger = Ledger(self.runs_dir / LEDGER)
        self.progress, self.bar = progress, bar
        self.interrupted = False

    # --- planning ------------------------------------------------------------------------------

    def pending(self) -> tuple[list[RunSpec], Counter]:
        """The cells to run now, and how many are skipped per earlier outcome."""
        states = self.ledger.states()
        todo, skipped = [], Counter()
        for run in self.matrix.runs:
            state = states.get(run.key, {}).get("outcome")
            if state == "done" and (self.sessions / run.key / META_NAME).exists():
                skipped["done"] += 1
            elif state in ("failed", "timed out") and not self.retry_failed:
                skipped[state] += 1
            else:
                todo.append(run)
        return todo, skipped

    # --- running -------------------------------------------------------------------------------

    def run(self) -> dict[str, Attempt]:
        """Run every pending cell, holding the folder's lock (BatchLocked when another batch holds it);
        returns this invocation's attempts by key."""
        with BatchLock(self.runs_dir):
            for folder in (self.sessions, self.attempts, self.logs):
                folder.mkdir(parents=True, exist_ok=True)
            todo, skipped = self.pending()
            for outcome, n in sorted(skipped.items()):
                self.progress(f"skipping {n} run(s) {outcome} before"
                              + (" (--retry-failed runs them again)" if outcome != "done" else ""))
            return self.execute(todo) if todo else {}

    def execute(self, todo: list[RunSpec]) -> dict[str, Attempt]:
        """Run `todo` as children of this process, `jobs` at a time."""
        prepare_home(self.home, [run.scenario for run in todo], self.matrix.seed,
                     any(run.framework == "autogen" for run in todo))
        self.progress(f"batch {self.matrix.name}: {len(todo)} run(s), {self.jobs} at a time, into {self.sessions}")
        queue, running, finished = list(todo), [], {}
        with self.catching_interrupts(), \
                ProgressBar(len(todo), what="batch", unit="runs", terminal=self.bar, lines=self.bar) as bar:
            while queue or running:
                while queue and len(running) < self.jobs and not self.interrupted:
                    running.append(self.launch(queue.pop(0)))
                if self.interrupted:
                    queue.clear()
                    for job in running:
                        job.child.interrupt()
                for job in [j for j in running if j.child.ended()]:
                    running.remove(job)
                    attempt = self.conclude(job)
                    finished[attempt.key] = attempt
                    self.ledger.record(attempt)
                    self.report(bar, attempt)
                time.sleep(0.2)
        return finished

    def command(self, run: RunSpec) -> list[str]:
        """The `spillage run` command line for one cell."""
        return spillage_run(self.home, run.scenario_ref, self.sessions, run.key,
                            run_arguments(self.matrix, run, self.audit))

    def launch(self, run: RunSpec) -> Job:
        """Start the child for `run`, after moving any session of an earlier attempt out of the way."""
        self.retire(run.key)
        log = open(self.logs / f"{run.key}.log", "ab")
        log.write(f"\n# {utc_timestamp()} {' '.join(self.command(run))}\n".encode())
        log.flush()
        return Job(run, TimedRun(self.command(run), log, self.matrix.timeout + SETUP_SECONDS), log)

    def retire(self, key: str) -> Path | None:
        """Move the session of cell `key`, if there is one, to attempts/ as its next numbered attempt:
        `attempts/<key>.<n>/<key>/`, under its own name, as which it is signed."""
        session = self.sessions / key
        if not session.exists():
            return None
        number = len(list(self.attempts.glob(f"{key}.*"))) + 1
        folder = self.attempts / f"{key}.{number}"
        folder.mkdir()
        session.rename(folder / key)
        return folder / key

    @contextlib.contextmanager
    def catching_interrupts(self):
        """Inside, Ctrl-C sets `interrupted` (see on_interrupt) instead of raising KeyboardInterrupt."""
        previous = signal.signal(signal.SIGINT, self.on_interrupt)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    def on_interrupt(self, signum, frame) -> None:
        if not self.interrupted:
            self.progress("\nCtrl-C: stopping the running agents and sealing their sessions")
        self.interrupted = True

    def conclude(self, job: Job) -> Attempt:
        """Read how the child ended from its session's meta.json (the child's exit code as a fallback)."""
        job.log.close()
        outcome, reason = classify(self.sessions / job.run.key, job.child.returncode, self.audit,
                                   self.interrupted, self.logs / f"{job.run.key}.log")
        return self.attempt(job.run.key, outcome, reason, time.monotonic() - job.child.began)

    def attempt(self, key: str, outcome: str, reason: str, seconds: float, **where) -> Attempt:
        """The Attempt of a finished cell; an interrupted cell's session moves to attempts/ first."""
        session = self.sessions / key
        if outcome == "interrupted":
            session = self.retire(key) or session
        found = str(session.relative_to(self.runs_dir)) if session.exists() else ""
        return Attempt(key, outcome, reason, found, seconds, **where)

    @staticmethod
    def report(bar: ProgressBar, attempt: Attempt) -> None:
        bar.step(f"{attempt.outcome}: {attempt.key}" + (f" ({attempt.reason})" if attempt.reason else "")
                 + f" in {attempt.seconds:.0f} s")

    # --- the end -------------------------------------------------------------------------------

    def summary(self) -> list[str]:
        """One line per outcome over the whole matrix (earlier invocations included), the first few
        runs of each outcome other than done with their reasons, and where the results are."""
        states = self.ledger.states()
        by_outcome: dict[str, list[str]] = {}
        for run in self.matrix.runs:
            by_outcome.setdefault(states.get(run.key, {}).get("outcome", "not run"), []).append(run.key)
        lines = [f"batch {self.matrix.name}: {len(self.matrix.runs)} run(s)"]
        for outcome in (*OUTCOMES, "not run"):
            keys = by_outcome.get(outcome, [])
            if keys:
                lines.append(f"  {outcome:<12}{len(keys):>5}")
            if outcome != "done":
                lines += [f"      {k}: {states[k]['reason']}" for k in keys[:3] if k in states]
        lines.append(f"sessions in {self.sessions}; ledger {self.ledger.path}; child logs in {self.logs}")
        return lines


def run_arguments(matrix: Matrix, run: RunSpec, audit: bool) -> list[str]:
    """The arguments of `spillage run` for one cell, but for where its session goes (spillage_run)."""
    c = run.condition.condition
    argv = ["--agent", run.framework, "--model", run.model, "--max-steps", str(matrix.max_steps),
            "--timeout", str(matrix.timeout), "--seed", str(matrix.seed), "--prompt", c.prompt,
            "--no-preflight"]  # checked once for the whole batch
    if Path(run.scenario_ref).is_file():
        argv += ["--style", run.scenario.style]
    if c.system_note:
        argv += ["--system-note", c.system_note]
    if c.guard != "off":
        argv += ["--guard", c.guard] + (["--guard-policy", c.guard_policy] if c.guard_policy else [])
    if matrix.model_via_proxy:
        argv.append("--model-via-proxy")
    if matrix.isolation != "sandbox":
        argv += ["--isolation", matrix.isolation]
    if matrix.live:
        argv += ["--live", ",".join(matrix.live)]
    if audit:
        argv.append("--audit")
    return argv


def spillage_run(home: Path, scenario: str, runs_dir: Path, name: str, arguments: list[str]) -> list[str]:
    """The `spillage run` command line that puts session `name` of `scenario` into `runs_dir`
    (`arguments` last: a command agent's `-- CMD` must end it)."""
    return [sys.executable, "-m", "spillage.runner.cli", "--home", str(home), "run", "--scenario", scenario,
            "--runs-dir", str(runs_dir), "--session-name", name, *arguments]


def prepare_home(home: Path, scenarios: list, seed: int, autogen: bool) -> None:
    """What children would otherwise race for: the CA, the signing key of `home`, the catalogs of
    `scenarios` (built once into its store, each run then finds its own), and AutoGen's virtual
    environment when `autogen`."""
    from spillage.origins.catalog_store import stored_catalog
    from spillage.runner.session_run import catalog_scenarios

    ensure_ca(home / "ca")
    load_or_create_key(home)
    for scenario in {s.id: s for s in scenarios}.values():
        stored_catalog(home, catalog_scenarios(scenario)[0], seed)
    if autogen:
        from spillage.runner.autogen_venv import autogen_python
        autogen_python()


def classify(session: Path, exit_code: int | None, audited: bool, interrupted: bool,
             log: Path) -> tuple[str, str]:
    """(outcome, reason) of a finished child, from its session's meta.json and audit.json."""
    try:
        meta = read_meta(session)
        if meta is None:
            raise ValueError("no meta.json")
    except (OSError, ValueError):
        if interrupted:
            return "interrupted", "Ctrl-C before the session began"
        return "failed", f"no session (exit {exit_code}): {last_line(log)}"
    status = meta.get("status")
    if status == "interrupted" or (interrupted and status == "running"):
        return "interrupted", meta.get("status_detail", "Ctrl-C")
    if status == "timed out":
        return "timed out", meta.get("status_detail", "")
    evidence = meta.get("evidence")
    if "capture" not in meta or evidence not in (None, "sealed"):
        detail = meta.get("tampered") or meta.get("capture_damage") or "not sealed"
        return "failed", f"evidence {evidence}: {detail}" if evidence else f"capture damaged: {detail}"
    if status != "completed":
        return "failed", f"agent {status}: {meta.get('status_detail', '')}".rstrip(": ")
    reported = meta.get("agent_outcome") if isinstance(meta.get("agent_outcome"), dict) else {}
    stopped, detail = reported.get("stopped"), reported.get("detail") or ""
    if stopped not in (None, "finished", "step limit"):
        return "failed", f"{stopped}: {detail}".rstrip(": ")
    if meta.get("agent_exit") != 0 and stopped != "step limit":
        why = f"; its last error line: {meta['agent_last_error']}" if meta.get("agent_last_error") else ""
        return "failed", f"agent exited {meta.get('agent_exit')}{why}"
    if audited and not (session / REPORT_NAME).exists():
        return "failed", f"audit failed: {last_line(log)}"
    return "done", "the agent reached its step limit" if stopped == "step limit" else ""


EVIDENCE_FAILURES = ("evidence ", "capture damaged")   # how classify words a cell whose evidence is not clean


def batch_status(states: dict, runs) -> int:
    """The batch's exit status (proxy/settings.py): 0 when every run is done; 1 when a run's evidence
    is not clean; else 3 when a run failed, timed out or has not run."""
    outcomes = [states.get(r.key, {}) for r in runs]
    if all(o.get("outcome") == "done" for o in outcomes):
        return OK
    if any(o.get("outcome") == "failed" and str(o.get("reason", "")).startswith(EVIDENCE_FAILURES) for o in outcomes):
        return DAMAGED
    return AGENT_FAILED


def last_line(log: Path) -> str:
    """The last non-empty line of a child's log."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return lines[-1].removeprefix("spillage: ") if lines else "(no output)"
