"""Run a batch's cells on a Dask cluster, with the local batch's ledger, folder, resume and retry.

    dask scheduler --host HOST                                              # one machine
    SPILLAGE_HOME=~/.spillage dask worker tcp://HOST:8786 --nthreads 2 --resources browser=2   # each worker
    spillage batch matrices/paper.yaml --scheduler tcp://HOST:8786

Each cell is a task (`run_cell`) asking for one `browser`: a worker runs at most as many cells at once as
it announced. The task runs the same `spillage run` command the local batch runs, in the worker's own
spillage home (its CA, its signing key, its catalogs), into a folder of its own; it verifies the session,
and returns it as a gzipped tar with what it verified. The client unpacks it into the batch folder, with
the modes it was sealed with, and verifies it again against the worker's head, signed root and key
(`receive`): a session that does not arrive as it left is a failed cell with the reason in the ledger.

A worker that dies mid-cell loses its task; the scheduler runs it elsewhere, and only the result that
reaches the client lands. Ctrl-C on the client sets the batch's stop event: running cells stop their
agents and seal, and come back as interrupted; cells not started are cancelled. docs/CLUSTER.md.
"""

import fcntl
import gzip
import hashlib
import io
import os
import secrets
import shutil
import stat
import tarfile
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from pathlib import PurePosixPath

from spillage.audit.progress import ProgressBar
from spillage.proxy.capturelog import utc_timestamp
from spillage.proxy.layout import LOG_NAME
from spillage.proxy.layout import META_NAME
from spillage.proxy.layout import make_private_dir
from spillage.proxy.layout import read_meta
from spillage.proxy.settings import DEFAULT_HOME
from spillage.proxy.settings import SEED
from spillage.proxy.settings import TIMEOUT
from spillage.proxy.signing import pinned_fingerprint
from spillage.proxy.verify import verify
from spillage.runner.batch import SEAL_SECONDS
from spillage.runner.batch import SETUP_SECONDS
from spillage.runner.batch import Attempt
from spillage.runner.batch import Batch
from spillage.runner.batch import TimedRun
from spillage.runner.batch import classify
from spillage.runner.batch import prepare_home
from spillage.runner.batch import run_arguments
from spillage.runner.batch import spillage_run
from spillage.runner.matrix import RunSpec

BROWSER = "browser"    # the worker resource a cell takes one of: `dask worker ... --resources browser=N`
CONNECT_SECONDS = 5
STAGING = "cells"      # <worker's home>/cells/<key>.<random>/: where a worker runs a cell
GUARD_POLICY = "guard-policy.yaml"   # the cell's guard policy, as the client sent it, in its staging folder
POLL_SECONDS = 0.5
STATUS_SECONDS = 2     # how often the client asks the scheduler which workers are alive, for the progress note
ARRIVAL_SECONDS = 30   # beyond SEAL_SECONDS, for a stopped cell's session to reach the client
MAX_KEYS_BYTES = 1 << 20
WORKER_KEYS = "workers.keys"   # in the client's spillage home: each worker's key, pinned on first use


class ClusterError(RuntimeError):
    """The cluster cannot run the batch; str() is one line."""


class ArrivalError(ValueError):
    """A session archive that cannot be unpacked as sent; str() is one line."""


# --- connecting --------------------------------------------------------------------------------------


def connect(address: str, browsers: bool = True):
    """A Client of the scheduler at `address` with at least one worker (offering a browser, when
    `browsers`); ClusterError within about CONNECT_SECONDS when nothing answers there."""
    from distributed import Client
    from distributed.comm.addressing import parse_address
    from distributed.comm.addressing import parse_host_port

    try:
        scheme, location = parse_address(address, strict=True)
        parse_host_port(location)
        if scheme not in ("tcp", "tls"):
            raise ValueError(scheme)
    except ValueError:
        raise ClusterError(f"--scheduler {address}: expected tcp://HOST:PORT (or tls://HOST:PORT)") from None
    handshake(address)
    try:
        client = Client(address, timeout=CONNECT_SECONDS, set_as_default=False)
    except OSError as e:
        raise ClusterError(f"--scheduler {address}: {e}") from None
    workers = client.scheduler_info(n_workers=-1)["workers"].values()  # all of them, not the first 5
    if not browsers and workers:
        return client
    if not browsers:
        client.close()
        raise ClusterError(f"--scheduler {address}: no worker; start some with `dask worker {address}`")
    if not any(w.get("resources", {}).get(BROWSER) for w in workers):
        client.close()
        raise ClusterError(f"--scheduler {address}: no worker offers a browser; start workers with "
                           f"`dask worker {address} --resources {BROWSER}=N`")
    return client


def handshake(address: str) -> None:
    """Connect to the scheduler at `address`, then wait for its Dask handshake, each within
    CONNECT_SECONDS (distributed's Client waits for the handshake without end); ClusterError says which
    of the two ran out."""
    import asyncio

    from distributed.comm import connect as comm_connect
    from distributed.comm.addressing import get_address_host_port

    host, port = get_address_host_port(address)

    async def reach() -> None:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), CONNECT_SECONDS)
        writer.close()

    async def greet() -> None:
        comm = await asyncio.wait_for(comm_connect(address, timeout=CONNECT_SECONDS), CONNECT_SECONDS)
        await comm.close()

    for step, what in ((reach, "no connection"), (greet, "the connection opened, but no Dask handshake came")):
        try:
            asyncio.run(step())
        except (TimeoutError, OSError) as e:   # distributed's CommClosedError is an OSError
            timeout = "the connect timeout" if step is reach else "the handshake timeout"
            why = f"{what} within {CONNECT_SECONDS} s ({timeout})" if isinstance(e, TimeoutError) else \
                f"{' '.join(str(e).split()) or type(e).__name__}"
            raise ClusterError(f"--scheduler {address}: {why}; is a Dask scheduler listening there?") from None
        except (MemoryError, ValueError, TypeError) as e:   # bytes that are not Dask's frames
            raise ClusterError(f"--scheduler {address}: something answers there, but not a Dask scheduler "
                               f"({type(e).__name__})") from None


def read_pins(path: Path) -> frozenset[str]:
    """The key fingerprints of a `--keys` file: one key a line (as `spillage key` prints it, or any form
    `--key` takes), blank lines and `#` comments skipped. ValueError naming the file and line."""
    try:
        if path.stat().st_size > MAX_KEYS_BYTES:
            raise ValueError(f"{path}: more than {MAX_KEYS_BYTES // 1024} KiB; a keys file is a few lines")
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    pins = set()
    for number, line in enumerate(lines, 1):
        if line.strip() and not line.lstrip().startswith("#"):
            try:
                pins.add(pinned_fingerprint(line.strip()))
            except ValueError as e:
                raise ValueError(f"{path}:{number}: {e}") from None
    if not pins:
        raise ValueError(f"{path}: no key in it")
    return frozenset(pins)


class WorkerKeys:
    """The key each worker signed its first cell with (trust on first use), kept in the client's spillage
    home, one `ADDRESS FINGERPRINT` a line: a cell signed by another key than its worker showed before
    fails. A worker is known by its address, so one restarted on another port is pinned anew."""

    def __init__(self, home: Path, say) -> None:
        self.path, self.say = Path(home) / WORKER_KEYS, say

    def check(self, worker: str, signer: str) -> str:
        """'' when `signer` is the key `worker` showed first (pinned now, and said, if it showed none);
        else why not."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(self.path, "a+", encoding="utf-8") as f:
            fcntl.flock(f, fcntl.LOCK_EX)   # batches of this home may land cells at once
            f.seek(0)
            known = dict(line.split(" ", 1) for line in f.read(MAX_KEYS_BYTES).splitlines() if " " in line)
            if worker not in known:
                f.write(f"{worker} {signer}\n")
                self.say(f"pinned {short(worker)}'s key {signer} on first use, in {self.path}: a cell it signs "
                         "with any other key fails (--keys FILE pins the keys instead)")
                return ""
        if known[worker] == signer:
            return ""
        return (f"signed by {signer}, but {short(worker)} signed with {known[worker]} before (pinned in "
                f"{self.path}; remove its line if the worker changed its key on purpose)")


def preflight_workers(client, models: list[str]) -> None:
    """Check the models from every worker, as `spillage run` would (PreflightError naming the worker)."""
    from spillage.runner.preflight import PreflightError

    for worker, problem in client.run(model_problem, models).items():
        if problem:
            raise PreflightError(f"worker {worker}: {problem}")


def model_problem(models: list[str]) -> str:
    """Why one of `models` does not answer from here ('' when they all do); run on each worker."""
    from spillage.agents.model_spec import parse_model
    from spillage.runner.preflight import PreflightError
    from spillage.runner.preflight import preflight

    try:
        for model in models:
            preflight(parse_model(model))
    except PreflightError as e:
        return str(e)
    return ""


# --- a cell on a worker ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """One cell as a worker runs it: `spillage run --scenario SCENARIO ARGUMENTS...` into a folder of its own."""

    key: str                        # the cell's name: its session folder's, its ledger key
    scenario: str                   # a benchmark id, or the file name of `scenario_file`
    arguments: tuple[str, ...]      # the rest of `spillage run`'s arguments (run_arguments, or `-- CMD`)
    batch: str                      # this invocation of the batch: names its stop event, start events, tasks
    seed: int = SEED.default
    autogen: bool = False
    seconds: float = TIMEOUT.default + SETUP_SECONDS  # then the child is asked to stop
    scenario_file: bytes | None = None    # a scenario file of one's own travels with its cell
    style: str | None = None
    guard_policy: bytes | None = None     # so does the guard's policy file (docs/GUARD.md)

    @property
    def task(self) -> str:
        """The cell's Dask key."""
        return f"{self.batch}/{self.key}"


def cell_of(run: RunSpec, matrix, audit: bool, batch: str) -> Cell:
    """The Cell of a matrix run, for the batch invocation `batch`."""
    own = Path(run.scenario_ref).is_file()
    policy = run.condition.condition.guard_policy
    return Cell(run.key, Path(run.scenario_ref).name if own else run.scenario_ref,
                tuple(run_arguments(matrix, run, audit)), batch, matrix.seed, run.framework == "autogen",
                matrix.timeout + SETUP_SECONDS, Path(run.scenario_ref).read_bytes() if own else None,
                run.scenario.style if own else None, Path(policy).read_bytes() if policy else None)


@dataclass(frozen=True)
class CellResult:
    """What a worker sends back for a cell."""

    key: str
    worker: str                       # the worker's address
    started: bool                     # False: the batch was stopped before the cell began
    exit_code: int | None = None      # of `spillage run`
    seconds: float = 0.0
    log: bytes = b""                  # the child's output, for logs/<key>.log
    archive: bytes | None = None      # the session folder as a gzipped tar (None: the child made none)
    files: dict | None = None         # each file's SHA-256, by its name in the archive
    claim: dict | None = None         # what verify said on the worker: ok, count, head, issuer, root, summary


def worker_home() -> Path:
    """A worker's spillage home: $SPILLAGE_HOME, else .spillage in the folder it was started in."""
    return Path(os.environ.get("SPILLAGE_HOME") or DEFAULT_HOME).resolve()


def run_cell(cell: Cell) -> CellResult:
    """Run `cell` on this Dask worker and send its verified session back (a Dask task)."""
    from distributed import get_worker

    worker = get_worker()
    if stop_requested(cell, worker):
        return CellResult(cell.key, worker.address, started=False)
    worker.log_event(cell.batch, {"key": cell.key, "worker": worker.address})
    home = worker_home()
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    began = time.monotonic()
    staging = Path(tempfile.mkdtemp(prefix=f"{cell.key}.", dir=make_private_dir(home / STAGING, exist_ok=True)))
    try:
        scenario = cell.scenario
        if cell.scenario_file is not None:
            scenario = str(staging / cell.scenario)
            Path(scenario).write_bytes(cell.scenario_file)
        prepare_cell(home, cell, scenario)
        arguments = list(cell.arguments)
        if cell.guard_policy is not None:   # the client's path, replaced by the policy's copy here
            policy = staging / GUARD_POLICY
            policy.write_bytes(cell.guard_policy)
            arguments[arguments.index("--guard-policy") + 1] = str(policy)
        argv = spillage_run(home, scenario, staging / "sessions", cell.key, arguments)
        with open(staging / "run.log", "w+b") as log:
            log.write(f"# {utc_timestamp()} on {worker.address}: {' '.join(argv)}\n".encode())
            log.flush()
            child = TimedRun(argv, log, cell.seconds)
            while not child.ended():
                if stop_requested(cell, worker):
                    child.interrupt()
                time.sleep(POLL_SECONDS)
            log.seek(0)
            output = log.read()
        return CellResult(cell.key, worker.address, True, child.returncode, time.monotonic() - began,
                          output, *sent(staging / "sessions" / cell.key))
    finally:
        remove_tree(staging)


def stop_requested(cell: Cell, worker) -> bool:
    """Whether the client stopped the batch (its stop event) or no longer wants this cell (cancelled,
    or the client went away)."""
    from distributed import Event

    task = worker.state.tasks.get(cell.task)
    return task is None or task.state == "cancelled" or Event(cell.batch).is_set()


def prepare_cell(home: Path, cell: Cell, scenario: str) -> None:
    """prepare_home for one cell, one cell of this home at a time (cells of a worker run in threads, and
    workers may share a home)."""
    from spillage.scenarios.loader import resolve_scenario

    with open(home / ".prepare.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        prepare_home(home, [resolve_scenario(scenario, cell.style)], cell.seed, cell.autogen)


def sent(session: Path) -> tuple[bytes | None, dict | None, dict | None]:
    """(archive, files, claim) of a finished cell's session: all None when the child made none."""
    if not (session / META_NAME).is_file():
        return None, None, None
    claim = None
    if (session / LOG_NAME).is_file():
        result = verify(session)
        signed = result.signed
        claim = {"ok": result.ok, "count": result.count, "head": result.head, "summary": result.summary(),
                 "issuer": signed.issuer if signed else "", "root": signed.root if signed else ""}
    archive, files = pack(session)
    return archive, files, claim


def remove_tree(folder: Path) -> None:
    """Remove `folder`, sealed read-only parts included."""
    def writable_then_retry(function, path, _exc):
        os.chmod(os.path.dirname(path), stat.S_IRWXU)
        function(path)

    if folder.exists():
        shutil.rmtree(folder, onexc=writable_then_retry)


# --- the archive ---------------------------------------------------------------------------------


def pack(session: Path) -> tuple[bytes, dict[str, str]]:
    """The session folder as a gzipped tar of its files and folders (names relative to it, modes kept),
    and the SHA-256 of each file."""
    buffer, files = io.BytesIO(), {}
    with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=6, mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for folder, dirs, names in os.walk(session):
            dirs.sort()
            for name in dirs + sorted(names):
                path = Path(folder) / name
                arcname = path.relative_to(session).as_posix()
                if path.is_symlink() or not (path.is_dir() or path.is_file()):
                    raise ArrivalError(f"{path}: neither a file nor a folder; a session holds only those")
                tar.add(path, arcname=arcname, recursive=False)
                if path.is_file():
                    with open(path, "rb") as f:
                        files[arcname] = hashlib.file_digest(f, "sha256").hexdigest()
    return buffer.getvalue(), files


def unpack(archive: bytes, dest: Path, files: dict[str, str]) -> None:
    """Unpack a session archive into the new folder `dest` with the modes it was packed with; ArrivalError
    when it holds anything but files and folders inside `dest`, or a file is not what the worker hashed."""
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            members = tar.getmembers()
            strange = next((m.name for m in members if not ((m.isfile() or m.isdir()) and inside(m.name))), None)
            if strange is not None:
                raise ArrivalError(f"the archive holds {strange!r}, not a file or folder inside the session")
            make_private_dir(dest)
            tar.extractall(dest, members=members, filter="data")  # refuses names outside dest
    except (tarfile.TarError, OSError, EOFError) as e:
        raise ArrivalError(f"the archive does not unpack: {e}") from None
    found = {}
    for member in members:
        if member.isfile():
            with open(dest / member.name, "rb") as f:
                found[member.name] = hashlib.file_digest(f, "sha256").hexdigest()
    if found != files:
        differs = sorted(set(found.items()) ^ set(files.items()))[0][0]
        raise ArrivalError(f"{differs} did not arrive as the worker sent it")
    for member in sorted(members, key=lambda m: m.name.count("/"), reverse=True):  # a folder after its files
        os.chmod(dest / member.name, member.mode & 0o755)


def inside(name: str) -> bool:
    """Whether an archive member's name stays inside the folder it is unpacked into."""
    path = PurePosixPath(name)
    return bool(name) and not path.is_absolute() and ".." not in path.parts


def receive(result: CellResult, dest: Path, pins: frozenset[str] = frozenset()) -> str:
    """Unpack a cell's session into `dest` and check it against what the worker verified: the same
    verdict, record count and head, signed by the same key up to the same Merkle root, which meta.json's
    signed head names too, and a key of `pins` when given. '' when it arrived as it left, else why not."""
    try:
        unpack(result.archive, dest, result.files or {})
    except ArrivalError as e:
        remove_tree(dest)
        return str(e)
    claim = result.claim
    if claim is None:
        return f"the worker sent a {LOG_NAME} it did not verify" if (dest / LOG_NAME).exists() else ""
    found = verify(dest)
    if (found.ok, found.count, found.head) != (claim["ok"], claim["count"], claim["head"]):
        return f"it verifies as {found.summary()}; on the worker it verified as {claim['summary']}"
    if not found.ok:
        return ""  # as damaged as it was on the worker: classify says why, from meta.json
    issuer, root = (found.signed.issuer, found.signed.root) if found.signed else ("", "")
    if (issuer, root) != (claim["issuer"], claim["root"]):
        return (f"signed by {issuer or 'no key'} up to root {root or '-'}; on the worker by "
                f"{claim['issuer'] or 'no key'} up to root {claim['root'] or '-'}")
    head = ((read_meta(dest) or {}).get("capture") or {}).get("signed_head") or {}
    if (head.get("hash"), head.get("root")) != (found.head, root):
        return (f"meta.json's signed head ({head.get('hash')}, root {head.get('root')}) is not the log's "
                "final checkpoint")
    if pins and issuer not in pins:
        return f"signed by {issuer or 'no key'}, which is not one of the pinned keys (--keys)"
    return ""


# --- the client ------------------------------------------------------------------------------------


class ClusterProgress(ProgressBar):
    """The batch's ProgressBar, whose note (cells running per worker, failed) can change between steps."""

    def show(self, note: str) -> None:
        if self.bar:
            self.bar.update(self.task, note=note)


class ClusterBatch(Batch):
    """A Batch whose cells run on the workers of a Dask `client` (see the module's docstring); sessions
    signed by a key outside `pins` (when given), or else by another key than their worker showed first
    (WorkerKeys), fail."""

    def __init__(self, client, *args, pins: frozenset[str] = frozenset(), **kwargs):
        super().__init__(*args, **kwargs)
        self.client, self.pins = client, pins
        self.worker_keys = WorkerKeys(self.home, self.progress)
        self.name = f"spillage-{self.matrix.name}-{secrets.token_hex(4)}"
        self.running: dict[str, str] = {}  # key → worker, as workers say they start
        self.ended: set[str] = set()       # keys whose task has ended (a start event may come after)
        self.lock = threading.Lock()       # start events arrive on the client's own thread
        self.failed = 0
        self.abandon = False

    def execute(self, todo: list[RunSpec]) -> dict[str, Attempt]:
        """Run `todo` on the workers, landing each session as it comes back; after Ctrl-C, wait for the
        running cells to come back sealed, at most SEAL_SECONDS + ARRIVAL_SECONDS."""
        from distributed import Event

        stop = Event(self.name, client=self.client)
        self.client.subscribe_topic(self.name, self.on_start)
        workers = len(self.client.scheduler_info(n_workers=-1)["workers"])
        self.progress(f"batch {self.matrix.name}: {len(todo)} run(s) on {workers} worker(s) of "
                      f"{self.client.scheduler.address}, into {self.sessions}")
        futures, finished, deadline, shown = {}, {}, None, 0.0
        try:
            with self.catching_interrupts(), \
                    ClusterProgress(len(todo), what="batch", unit="runs", terminal=self.bar, lines=self.bar) as bar:
                for run in todo:
                    cell = cell_of(run, self.matrix, self.audit, self.name)
                    future = self.client.submit(run_cell, cell, key=cell.task, resources={BROWSER: 1}, pure=False)
                    futures[future] = run.key
                while futures and not (self.abandon or (deadline and time.monotonic() > deadline)):
                    if self.interrupted and deadline is None:
                        deadline = time.monotonic() + SEAL_SECONDS + ARRIVAL_SECONDS
                        stop.set()
                        with self.lock:  # not while cancelling: start events need it on the client's thread
                            waiting = [f for f, key in futures.items() if key not in self.running]
                        self.client.cancel(waiting)
                    for future in [f for f in futures if f.done()]:
                        attempt = self.arrive(futures.pop(future), future)
                        if attempt is not None:
                            finished[attempt.key] = attempt
                            self.ledger.record(attempt)
                            self.report(bar, attempt)
                    if time.monotonic() > shown + STATUS_SECONDS:
                        bar.show(self.status())
                        shown = time.monotonic()
                    time.sleep(0.2)
        finally:
            if futures:
                stop.set()
                self.client.cancel(list(futures))
            self.client.unsubscribe_topic(self.name)
        return finished

    def on_start(self, event) -> None:
        """A worker says it began a cell (a start event of this batch's topic)."""
        _, message = event
        with self.lock:
            if message["key"] not in self.ended:
                self.running[message["key"]] = message["worker"]

    def on_interrupt(self, signum, frame) -> None:
        if self.interrupted:
            self.progress("Ctrl-C again: cancelling the cells still running (not recorded: a rerun runs them)")
            self.abandon = True
        super().on_interrupt(signum, frame)

    def arrive(self, key: str, future) -> Attempt | None:
        """Land a finished task's session and say how the cell ended; None for a cell that never began
        (cancelled, or stopped first): it stays to be run."""
        from distributed import KilledWorker

        with self.lock:
            self.running.pop(key, None)
            self.ended.add(key)
        if future.cancelled():
            return None
        if future.status == "error":
            error = future.exception()
            self.failed += 1
            self.retire(key)
            return self.attempt(key, "failed", f"the {error.allowed_failures + 1} workers that ran it all died "
                                "(distributed.scheduler.allowed-failures)" if isinstance(error, KilledWorker)
                                else f"{type(error).__name__}: {error}", 0.0)
        result = future.result()
        if not result.started:
            return None
        log = self.logs / f"{key}.log"
        with open(log, "ab") as f:
            f.write(b"\n" + result.log)
        problem, signer = "", ""
        self.retire(key)
        if result.archive is not None:
            problem = receive(result, self.sessions / key, self.pins)
            signer = (result.claim or {}).get("issuer", "") if not problem else ""
            if signer and not self.pins:
                problem = self.worker_keys.check(result.worker, signer)
        outcome, reason = classify(self.sessions / key, result.exit_code, self.audit, self.interrupted, log)
        if problem:
            outcome, reason = "failed", f"on arrival from {result.worker}: {problem}"
        self.failed += outcome in ("failed", "timed out")
        return self.attempt(key, outcome, reason, result.seconds, worker=result.worker, signer=signer)

    def status(self) -> str:
        """Cells running per worker, and failed so far."""
        live = set(self.client.scheduler_info(n_workers=-1)["workers"])
        with self.lock:
            for key in [k for k, w in self.running.items() if w not in live]:  # its worker died: rescheduled
                del self.running[key]
            per_worker = sorted(Counter(self.running.values()).items())
        running = ", ".join(f"{short(w)} {n}" for w, n in per_worker) or "none"
        return f"running: {running}; failed {self.failed}"

    def report(self, bar: ProgressBar, attempt: Attempt) -> None:
        bar.step(f"{attempt.outcome}: {attempt.key}" + (f" ({attempt.reason})" if attempt.reason else "")
                 + f" in {attempt.seconds:.0f} s" + (f" on {short(attempt.worker)}" if attempt.worker else "")
                 + f"; {self.status()}")

    def summary(self) -> list[str]:
        """The local summary, and which keys signed the sessions that landed."""
        signers = Counter(e["signer"] for e in self.ledger.states().values() if e.get("signer"))
        lines = super().summary()
        if signers:
            lines.insert(-1, "signed by " + ", ".join(f"{k} ({n} run(s))" for k, n in sorted(signers.items()))
                         + ("" if self.pins else f"; each worker's key pinned on first use in {self.worker_keys.path}"))
        return lines


def short(worker: str) -> str:
    """A worker's address without its protocol."""
    return worker.split("://", 1)[-1]

