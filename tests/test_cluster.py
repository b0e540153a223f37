"""`spillage batch --scheduler`: a session's trip from a Dask worker to the batch folder (archive, modes,
verification on arrival against what the worker verified), the folder's lock, the ledger across
reruns, bad addresses; and, end to end, the smoke matrix on a real scheduler and two real workers, one
of them killed mid-cell, and Ctrl-C on the client."""

import io
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tarfile
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from capture_helpers import records_of
from capture_helpers import signed_session
from spillage.proxy.layout import seal_permissions
from spillage.proxy.signing import fingerprint
from spillage.proxy.signing import load_or_create_key
from spillage.proxy.signing import raw_public
from spillage.proxy.verify import verify
from spillage.runner.batch import BatchLock
from spillage.runner.batch import BatchLocked
from spillage.runner.cluster import ArrivalError
from spillage.runner.cluster import CellResult
from spillage.runner.cluster import ClusterBatch
from spillage.runner.cluster import pack
from spillage.runner.cluster import read_pins
from spillage.runner.cluster import receive
from spillage.runner.cluster import sent
from spillage.runner.cluster import unpack
from spillage.runner.matrix import load_matrix

REPO = Path(__file__).resolve().parent.parent
SMOKE = REPO / "matrices" / "smoke.yaml"
SPILLAGE = [sys.executable, "-m", "spillage.runner.cli"]
DASK = str(Path(sys.executable).parent / "dask")
SEAL_WAIT = 120  # for a stopped batch: the seal time its cells get, and their sessions' trip back


# --- fast: a session's trip ----------------------------------------------------------------------


def sealed_session(folder: Path, home: Path) -> Path:
    """A signed, sealed session as `spillage run --audit` leaves it: read-only evidence, audit.json beside it."""
    folder.mkdir(parents=True)
    signed_session(folder, load_or_create_key(home))
    last = records_of(folder)[-1]
    meta = {"status": "completed", "agent_exit": 0, "evidence": "sealed",
            "signing": {"key": fingerprint(raw_public(load_or_create_key(home)))},
            "capture": {"records": last["seq"] + 1, "head": last["hash"],
                        "signed_head": {"seq": last["seq"], "hash": last["hash"], "tree_size": last["records"],
                                        "root": last["root"], "ts": last["ts"], "signature": last["signature"]}}}
    (folder / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    (folder / "audit.json").write_text('{"summary": {}}', encoding="utf-8")
    seal_permissions(folder)
    return folder


def contents(folder: Path) -> dict[str, tuple[bytes | None, int]]:
    """Every file's bytes and every entry's mode, by name below `folder`."""
    found = {}
    for path in sorted(folder.rglob("*")):
        mode = stat.S_IMODE(path.stat().st_mode)
        found[path.relative_to(folder).as_posix()] = (path.read_bytes() if path.is_file() else None, mode)
    return found


def result_of(session: Path, key: str = "cell", **changes) -> CellResult:
    archive, files, claim = sent(session)
    fields = dict(key=key, worker="tcp://10.0.0.7:40001", started=True, exit_code=0, seconds=12.0,
                  log=b"spillage: session ...\n", archive=archive, files=files, claim=claim)
    return CellResult(**{**fields, **changes})


def test_a_session_arrives_as_it_left_the_worker_content_modes_and_verdict(tmp_path):
    session = sealed_session(tmp_path / "worker" / "cell", tmp_path / "home")
    result = result_of(session)
    assert result.claim["ok"] and result.claim["issuer"] and set(result.files) >= {"capture.jsonl", "meta.json"}
    arrived = tmp_path / "client" / "cell"
    arrived.parent.mkdir()
    assert receive(result, arrived) == ""
    assert contents(arrived) == contents(session)  # bytes, and the sealed 0400 modes with them
    assert stat.S_IMODE((arrived / "capture.jsonl").stat().st_mode) == 0o400
    assert verify(arrived).ok
    pinned = fingerprint(raw_public(load_or_create_key(tmp_path / "home")))
    (tmp_path / "client" / "again").mkdir()
    assert receive(result, tmp_path / "client" / "again" / "cell", frozenset({pinned})) == ""


def test_a_session_that_does_not_arrive_as_the_worker_verified_it_is_refused_with_the_reason(tmp_path):
    session = sealed_session(tmp_path / "worker" / "cell", tmp_path / "home")
    result = result_of(session)
    (tmp_path / "client").mkdir()

    def arrive(name, pins=frozenset(), **changes):   # each into a folder of its own, under the cell's name
        (tmp_path / "client" / name).mkdir()
        return receive(result_of(session, **changes), tmp_path / "client" / name / "cell", pins)

    assert "on the worker it verified as OK" in arrive("head", claim={**result.claim, "head": "0" * 64})
    assert "up to root " + "1" * 64 in arrive("root", claim={**result.claim, "root": "1" * 64})
    other = fingerprint(raw_public(load_or_create_key(tmp_path / "other-home")))
    assert "not one of the pinned keys" in arrive("pins", frozenset({other}))

    altered = tmp_path / "altered"
    shutil.copytree(session, altered)
    os.chmod(altered / "capture.jsonl", 0o600)
    with open(altered / "capture.jsonl", "r+b") as f:
        f.seek(200)
        f.write(b"X")
    archive, _ = pack(altered)  # sent with the files the worker hashed before
    assert arrive("altered", archive=archive) == "capture.jsonl did not arrive as the worker sent it"
    assert not (tmp_path / "client" / "altered" / "cell").exists()
    assert arrive("torn", archive=result.archive[:-300]).startswith("the archive does not unpack")


@pytest.mark.parametrize("member", ["../outside", "/etc/evil", "link"])
def test_an_archive_with_a_path_out_of_its_folder_or_a_link_never_unpacks(tmp_path, member):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo(member)
        if member == "link":
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(info)
        else:
            info.size = 2
            tar.addfile(info, io.BytesIO(b"hi"))
    with pytest.raises(ArrivalError):
        unpack(buffer.getvalue(), tmp_path / "dest", {member: "0" * 64})
    assert not (tmp_path / "outside").exists()


# --- fast: the folder's lock, the ledger across reruns, bad input -----------------------------------------


def test_a_second_batch_on_the_same_folder_is_refused_in_one_line(tmp_path):
    with BatchLock(tmp_path / "out"):
        with pytest.raises(BatchLocked, match=r"another batch is running on this folder \(pid \d+ on "):
            with BatchLock(tmp_path / "out"):
                pass
        second = subprocess.run([*SPILLAGE, "--home", str(tmp_path / "home"), "batch", str(SMOKE),
                                 "--runs-dir", str(tmp_path / "out")], capture_output=True, text=True, timeout=60)
    assert second.returncode == 2
    assert second.stderr.count("\n") == 1 and "another batch is running on this folder" in second.stderr
    with BatchLock(tmp_path / "out"):  # released with its holder
        pass


class Finished:
    """A finished Dask future, as ClusterBatch.arrive reads it."""

    def __init__(self, result=None, error=None, cancelled=False):
        self.value, self.error, self.was_cancelled = result, error, cancelled
        self.status = "error" if error else "cancelled" if cancelled else "finished"

    def cancelled(self):
        return self.was_cancelled

    def exception(self):
        return self.error

    def result(self):
        return self.value


def cluster_batch(runs_dir: Path, **options) -> ClusterBatch:
    client = SimpleNamespace(scheduler_info=lambda n_workers: {"workers": {}})
    batch = ClusterBatch(client, load_matrix(SMOKE), runs_dir, runs_dir / "home", progress=lambda line: None,
                         **options)
    for folder in (batch.sessions, batch.attempts, batch.logs):
        folder.mkdir(parents=True, exist_ok=True)
    return batch


def test_the_ledger_records_each_cell_once_across_reruns_and_never_a_cell_that_did_not_run(tmp_path):
    from distributed import KilledWorker

    batch = cluster_batch(tmp_path / "out")
    first, second, third = (run.key for run in batch.matrix.runs[:3])
    session = sealed_session(tmp_path / "worker" / first, tmp_path / "worker-home")
    for key, future in ((first, Finished(result_of(session, first))),
                        (second, Finished(CellResult(second, "tcp://10.0.0.7:40001", started=False))),
                        (third, Finished(cancelled=True))):
        attempt = batch.arrive(key, future)
        if attempt is not None:
            batch.ledger.record(attempt)
    lines = batch.ledger.path.read_text().splitlines()
    assert len(lines) == 1  # a cell stopped before it began, or cancelled, is not a result
    entry = json.loads(lines[0])
    assert entry["outcome"] == "done" and entry["worker"] == "tcp://10.0.0.7:40001"
    assert entry["signer"] == fingerprint(raw_public(load_or_create_key(tmp_path / "worker-home")))
    assert verify(batch.sessions / first).ok

    rerun = cluster_batch(tmp_path / "out")
    todo, skipped = rerun.pending()
    assert skipped == Counter(done=1) and first not in {r.key for r in todo} and second in {r.key for r in todo}

    worker = SimpleNamespace(address="tcp://10.0.0.7:40001")
    died = rerun.arrive(second, Finished(error=KilledWorker(f"x/{second}", worker, 3)))
    assert (died.outcome, died.session) == ("failed", "")
    assert died.reason == "the 4 workers that ran it all died (distributed.scheduler.allowed-failures)"

    altered = result_of(session, first, claim={**result_of(session).claim, "head": "0" * 64})
    attempt = cluster_batch(tmp_path / "out").arrive(first, Finished(altered))  # the earlier session moves aside
    assert attempt.outcome == "failed"
    assert attempt.reason.startswith("on arrival from tcp://10.0.0.7:40001: it verifies as OK")
    assert attempt.session == f"sessions/{first}" and (batch.attempts / f"{first}.1").is_dir()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_bad_cluster_input_is_one_line_and_exit_2_in_seconds(tmp_path):
    def batch(*args):
        began = time.monotonic()
        done = subprocess.run([*SPILLAGE, "--home", str(tmp_path / "home"), "batch", str(SMOKE), "--runs-dir",
                               str(tmp_path / "out"), *args], capture_output=True, text=True, timeout=60)
        return done, time.monotonic() - began

    address = f"tcp://127.0.0.1:{free_port()}"
    nobody, took = batch("--scheduler", address)
    assert nobody.returncode == 2 and took < 15, (nobody.stderr, took)
    assert re.fullmatch(rf"spillage: --scheduler {address}: .*\n", nobody.stderr)
    bad, took = batch("--scheduler", "127.0.0.1:8786")
    assert (bad.returncode, bad.stderr) == (2, "spillage: batch: argument --scheduler: '127.0.0.1:8786' is not "
                                                "tcp://HOST:PORT (or tls://HOST:PORT) (`spillage batch --help` lists "
                                                "the options)\n") and took < 15
    both, _ = batch("--scheduler", address, "--jobs", "2")
    assert both.returncode == 2 and both.stderr.startswith("spillage: --jobs is for a local batch")
    keys = tmp_path / "keys"
    keys.write_text("# the workers\ned25519:123\n", encoding="utf-8")
    pinned, _ = batch("--scheduler", address, "--keys", str(keys))
    assert pinned.returncode == 2 and pinned.stderr == (
        f"spillage: {keys}:2: --key ed25519:123: a fingerprint is 'ed25519:' and 64 lowercase hex digits\n")
    local, _ = batch("--keys", str(keys))
    assert local.returncode == 2 and "--keys pins the keys of a cluster's workers" in local.stderr
    assert not (tmp_path / "out").exists()


def test_a_keys_file_takes_any_key_form_and_comments(tmp_path):
    key = load_or_create_key(tmp_path / "home")
    keys = tmp_path / "keys"
    public = tmp_path / "home" / "signing" / "ed25519.pub.pem"
    keys.write_text(f"# worker 1\n{fingerprint(raw_public(key))}\n\n{public}\n", encoding="utf-8")
    assert read_pins(keys) == {fingerprint(raw_public(key))}


# --- end to end: a real scheduler, two real workers ---------------------------------------------------


class Cluster:
    """`dask scheduler` and two `dask worker`s on 127.0.0.1, each worker with its own spillage home and
    one browser; every process in a process group of its own."""

    def __init__(self, root: Path):
        self.root, self.address = root, f"tcp://127.0.0.1:{free_port()}"
        self.scheduler = self.start([DASK, "scheduler", "--host", "127.0.0.1", "--port", self.address.rsplit(":", 1)[1],
                                     "--no-dashboard"], "scheduler")
        self.workers = {name: self.start([DASK, "worker", self.address, "--nthreads", "1", "--resources", "browser=1",
                                          "--no-dashboard", "--name", name], name, SPILLAGE_HOME=str(self.home(name)))
                        for name in ("w1", "w2")}
        self.wait_for_workers(2)

    def home(self, name: str) -> Path:
        return self.root / f"home-{name}"

    def start(self, argv: list[str], name: str, **env) -> subprocess.Popen:
        log = open(self.root / f"{name}.log", "ab")
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, **env}, cwd=self.root, start_new_session=True)

    def wait_for_workers(self, n: int) -> None:
        from distributed import Client

        with Client(self.address, timeout=30) as client:
            client.wait_for_workers(n, timeout=60)

    def key(self, name: str) -> str:
        return fingerprint(raw_public(load_or_create_key(self.home(name))))

    def kill(self, name: str) -> None:
        """SIGKILL a worker's process group (its nanny and its worker process)."""
        os.killpg(self.workers[name].pid, signal.SIGKILL)
        self.workers[name].wait()

    def stop(self) -> None:
        """Stop everything started here, then whatever still runs for it (a killed worker's cells finish on
        their own: their `spillage run` has its own process group and timeout)."""
        for process in [*self.workers.values(), self.scheduler]:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in [*self.workers.values(), self.scheduler]:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
        deadline = time.monotonic() + 90
        while (left := self.leftovers()) and time.monotonic() < deadline:
            time.sleep(1)
        for pid in left:
            try:
                os.killpg(os.getpgid(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass

    def leftovers(self, what: bytes = b"") -> list[int]:
        """Processes whose command line names a folder of this cluster (and holds `what`)."""
        found = []
        for proc in Path("/proc").iterdir():
            try:
                line = (proc / "cmdline").read_bytes() if proc.name.isdigit() else b""
            except OSError:
                continue
            if str(self.root).encode() in line and what in line:
                found.append(int(proc.name))
        return found

    def cells_begun(self, name: str) -> list[Path]:
        """The session folders a worker's cells have begun (meta.json written), in its home's staging."""
        return sorted(self.home(name).glob("cells/*/sessions/*/meta.json"))

    def cells_capturing(self, name: str) -> list[Path]:
        """The capture logs a worker's cells have begun writing, in its home's staging."""
        return [p for p in sorted(self.home(name).glob("cells/*/sessions/*/capture.jsonl")) if p.stat().st_size]


@pytest.fixture
def cluster(tmp_path):
    if not shutil.which("chromium"):
        pytest.fail("Debian's chromium is required for end-to-end tests: apt-get install -y chromium")
    started = Cluster(tmp_path)
    yield started
    started.stop()


def batch_command(tmp_path: Path, runs: str, *extra: str) -> list[str]:
    return [*SPILLAGE, "--home", str(tmp_path / "client-home"), "batch", str(SMOKE), "--runs-dir",
            str(tmp_path / runs), *extra]   # no terminal: a progress line per run


def ledger(folder: Path) -> list[dict]:
    path = folder / "batch.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def decisions(session: Path) -> dict:
    """What a scripted agent decided and said, as its audit reads it: the choices (queries, filters,
    sorts, products viewed and carted, the final choice, success) and the content events, without seqs.
    Two live runs of one cell differ in tracker timing (dwell times, how beacons batch, whether a click
    beacon arrives before or after the form it submits), so their `spillage diff` is never `equal`."""
    def bare(value):
        if isinstance(value, dict):
            return {k: bare(v) for k, v in value.items() if k not in ("seq", "action", "evidence")}
        return [bare(v) for v in value] if isinstance(value, list) else value

    report = json.loads((session / "audit.json").read_text(encoding="utf-8"))
    content = Counter((e["category"], e["attribute"], e["matched"]) for e in report["events"]
                      if e["category"] in ("C_E", "C_I"))
    return {"choices": bare(report["choices"]), "content": sorted(content.items())}


@pytest.mark.e2e
@pytest.mark.needs_tool("autogen")
def test_the_smoke_matrix_on_two_workers_survives_a_killed_worker_and_decides_as_a_local_run(tmp_path, cluster):
    local = subprocess.run([*SPILLAGE, "--home", str(tmp_path / "local-home"), "batch", str(SMOKE), "--jobs", "2",
                            "--runs-dir", str(tmp_path / "local")], capture_output=True, text=True, timeout=900)
    assert local.returncode == 0, local.stderr[-3000:]

    client = subprocess.Popen(batch_command(tmp_path, "out", "--scheduler", cluster.address),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not cluster.cells_begun("w1"):
        assert client.poll() is None, client.communicate()
        assert time.monotonic() < deadline, "worker w1 began no cell in 300 s"
        time.sleep(0.2)
    killed = cluster.cells_begun("w1")[0].parent.name
    assert not (tmp_path / "out" / "sessions" / killed).exists()
    cluster.kill("w1")
    out, err = client.communicate(timeout=900)
    assert client.returncode == 0, err[-3000:]
    assert re.search(r"^  done +8$", out, re.MULTILINE)
    assert re.search(r"^spillage: batch \[\d/8 runs\] done: \S+ in \d+ s on 127\.0\.0\.1:\d+; running: ", err,
                     re.MULTILINE)

    entries = ledger(tmp_path / "out")
    assert sorted(e["key"] for e in entries) == sorted(r.key for r in load_matrix(SMOKE).runs)  # each once
    assert all(e["outcome"] == "done" for e in entries)
    w2 = cluster.key("w2")
    assert next(e for e in entries if e["key"] == killed)["signer"] == w2  # rerun on the live worker
    assert verify(tmp_path / "out" / "sessions" / killed, w2).ok  # the dead worker's half-run never landed
    assert {e["signer"] for e in entries} <= {cluster.key("w1"), w2}
    for entry in entries:
        session = tmp_path / "out" / entry["session"]
        assert verify(session, entry["signer"]).ok, session
        assert decisions(session) == decisions(tmp_path / "local" / "sessions" / entry["key"]), entry["key"]

    report = subprocess.run([*SPILLAGE, "--home", str(tmp_path / "client-home"), "report",
                             str(tmp_path / "out" / "sessions"), "--out", str(tmp_path / "report")],
                            capture_output=True, text=True, timeout=300)
    assert report.returncode == 0 and "8 sessions reported, 0 excluded" in report.stderr, report.stderr
    audit = subprocess.run([*SPILLAGE, "--home", str(tmp_path / "client-home"), "audit",
                            str(tmp_path / "out" / "sessions"), "--jobs", "2"], capture_output=True, text=True,
                           timeout=300)
    assert audit.returncode == 0 and "audited 8 of 8 sessions" in audit.stderr, audit.stderr

    again = subprocess.run(batch_command(tmp_path, "out", "--scheduler", cluster.address), capture_output=True,
                           text=True, timeout=120)
    assert again.returncode == 0 and "skipping 8 run(s) done before" in again.stderr
    assert len(ledger(tmp_path / "out")) == 8


@pytest.mark.e2e
@pytest.mark.needs_tool("autogen")
def test_ctrl_c_on_the_client_stops_the_clusters_cells_seals_them_and_exits_130(tmp_path, cluster):
    client = subprocess.Popen(batch_command(tmp_path, "out", "--scheduler", cluster.address),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not (cluster.cells_capturing("w1") and cluster.cells_capturing("w2")):   # not just begun: on a
        assert client.poll() is None, client.communicate()               # loaded machine a proxy takes seconds
        assert time.monotonic() < deadline, "the workers began no captures in 300 s"
        time.sleep(0.2)
    time.sleep(3)  # their agents are at work
    client.send_signal(signal.SIGINT)
    out, err = client.communicate(timeout=SEAL_WAIT)
    assert client.returncode == 130, err[-3000:]
    assert "interrupted" in out and "not run" in out
    entries = ledger(tmp_path / "out")
    assert entries and all(e["outcome"] in ("interrupted", "done") for e in entries)
    for entry in entries:
        if entry["outcome"] == "interrupted":  # sealed on the worker, verified, kept in attempts/
            assert entry["session"].startswith("attempts/") and verify(tmp_path / "out" / entry["session"]).ok
    deadline = time.monotonic() + 30
    while cluster.leftovers(b"spillage.runner.cli"):
        assert time.monotonic() < deadline, "a worker still runs a cell 30 s after the batch stopped"
        time.sleep(0.5)



@pytest.mark.e2e
def test_audit_on_the_cluster_writes_what_a_local_audit_writes_and_names_what_fails(tmp_path, cluster):
    corpus = Path(__file__).parent / "corpus" / "sessions"
    for side in ("local", "remote"):
        for session in sorted(corpus.iterdir())[:6]:
            shutil.copytree(session, tmp_path / side / session.name)
    damaged = sorted((tmp_path / "remote").iterdir())[0] / "capture.jsonl"
    damaged.chmod(0o600)
    damaged.write_bytes(damaged.read_bytes().replace(b"kettle", b"kettlf", 1))
    home = ["--home", str(tmp_path / "client-home")]
    local = subprocess.run([*SPILLAGE, *home, "audit", str(tmp_path / "local"), "--jobs", "2"],
                           capture_output=True, text=True, timeout=300)
    assert local.returncode == 0, local.stderr
    remote = subprocess.run([*SPILLAGE, *home, "audit", str(tmp_path / "remote"), "--scheduler", cluster.address],
                            capture_output=True, text=True, timeout=300)
    assert remote.returncode == 1 and "audited 5 of 6 sessions, 1 failed" in remote.stderr, remote.stderr
    failed = [line for line in remote.stdout.splitlines() if "\tFAILED\t" in line]
    assert len(failed) == 1 and failed[0].startswith(str(damaged.parent)) and "modified" in failed[0]

    def audit_json(session: Path) -> dict:
        report = json.loads((session / "audit.json").read_text(encoding="utf-8"))
        report["catalog"].pop("source")   # found in one home's store, rebuilt in another's: the same sha256
        return report

    for session in sorted((tmp_path / "remote").iterdir())[1:]:
        assert audit_json(session) == audit_json(tmp_path / "local" / session.name), session.name
    assert not list(cluster.home("w1").glob("audits/*")) and not list(cluster.home("w2").glob("audits/*"))
    refused = subprocess.run([*SPILLAGE, *home, "audit", str(tmp_path / "remote"), "--scheduler", cluster.address,
                              "--jobs", "2"], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "it takes no --scenario, --profiles, --catalog or --jobs" in refused.stderr


def test_without_keys_each_workers_key_is_pinned_on_first_use_and_another_key_fails(tmp_path):
    said = []
    batch = cluster_batch(tmp_path / "out")
    batch.worker_keys.say = said.append
    first, second, third = (run.key for run in batch.matrix.runs[:3])
    honest = sealed_session(tmp_path / "w1" / first, tmp_path / "worker-home")
    again = sealed_session(tmp_path / "w2" / third, tmp_path / "worker-home")
    fresh = sealed_session(tmp_path / "w3" / second, tmp_path / "fresh-key-home")   # a malicious worker's new key
    pinned = fingerprint(raw_public(load_or_create_key(tmp_path / "worker-home")))
    assert batch.arrive(first, Finished(result_of(honest, first))).outcome == "done"
    assert said == [f"pinned 10.0.0.7:40001's key {pinned} on first use, in {tmp_path / 'out' / 'home' / 'workers.keys'}: "
                    "a cell it signs with any other key fails (--keys FILE pins the keys instead)"]
    refused = batch.arrive(second, Finished(result_of(fresh, second)))
    assert refused.outcome == "failed" and refused.reason.startswith(
        f"on arrival from tcp://10.0.0.7:40001: signed by {fingerprint(raw_public(load_or_create_key(tmp_path / 'fresh-key-home')))}, "
        f"but 10.0.0.7:40001 signed with {pinned} before")
    assert batch.arrive(third, Finished(result_of(again, third))).outcome == "done"
    assert (tmp_path / "out" / "home" / "workers.keys").read_text() == f"tcp://10.0.0.7:40001 {pinned}\n"
    pins = cluster_batch(tmp_path / "pinned", pins=frozenset({pinned}))   # --keys: no pinning on first use
    assert pins.arrive(first, Finished(result_of(honest, first))).outcome == "done"
    assert not (tmp_path / "pinned" / "home" / "workers.keys").exists()
