"""`spillage verify`: check a capture log's chain, sequence, bodies, blobs, Merkle checkpoints and their
signatures, its seal, and meta.json.

Streams the log and stops at the first problem, classified as in docs/CAPTURE_FORMAT.md; what the
signatures prove, and against whom, is in docs/EVIDENCE.md.

Each line's own checks (its JSON, the hash of its content, its body and blob, the schema, its Merkle
leaf) need nothing but the line: `line_facts` does them, for a long log in worker processes, a chunk
of the file each. What needs the lines before (the chain, seq, the tree, signatures, the seal) is the
walk's, in this process, in file order, with the checks in the order they always had, so that the
first problem found and its message are what reading the log line by line finds.

A chunk's lines go first to a pass of our own in C (`linecheck`, `_linecheck.c`): in one read of a line's
bytes it proves them canonical JSON, checks the schema, and computes the hashes, and it takes the lines it
finds clean, of the kinds the walk needs nothing else of, a run of them at a time. A line it does not take
is read by `line_facts`, which says what is wrong with it (tests/test_linecheck.py: the same facts as line
by line); without the extension, every line is.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import pickle
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any, NamedTuple

from spillage.proxy.bound import NOT_BOUND
from spillage.proxy.bound import bound_problem
from spillage.proxy.capturelog import GENESIS
from spillage.proxy.capturelog import MAX_LINE_BYTES
from spillage.proxy.capturelog import SEAL_KINDS
from spillage.proxy.capturelog import CaptureError
from spillage.proxy.capturelog import TornLineError
from spillage.proxy.capturelog import canonical_record
from spillage.proxy.capturelog import iter_records
from spillage.proxy.capturelog import is_sha256
from spillage.proxy.capturelog import read_body
from spillage.proxy.capturelog import read_line
from spillage.proxy.capturelog import record_hash
from spillage.proxy.layout import BLOB_DIR
from spillage.proxy.layout import blob_path
from spillage.proxy.layout import capture_path
from spillage.proxy.layout import CHECKPOINT_NOTE
from spillage.proxy.layout import read_checkpoint_note
from spillage.proxy.layout import read_meta
from spillage.proxy.linecheck import scanner
from spillage.proxy.merkle import MerkleFrontier
from spillage.proxy.merkle import leaf_hash
from spillage.proxy.notes import NoteError
from spillage.proxy.notes import checkpoint_text
from spillage.proxy.notes import long_term_name
from spillage.proxy.notes import origin
from spillage.proxy.notes import parse_note
from spillage.proxy.schema import record_valid
from spillage.proxy.schema import record_valid_plain
from spillage.proxy.schema import schema_problem
from spillage.proxy.signing import certificate_ok
from spillage.proxy.signing import checkpoint_message
from spillage.proxy.signing import fingerprint
from spillage.proxy.signing import note_signed
from spillage.proxy.signing import pinned_fingerprint
from spillage.proxy.signing import signature_ok
from spillage.proxy.signing import unb64

CRASH_SEALED = "truncated, sealed after crash"
DAMAGE = (
    "modified", "malformed", "missing", "inserted", "reordered", "truncated", "torn last line",
    "blob missing", "blob altered", "bad signature", "unsigned", "wrong key", "wrong session", "not cosigned",
    "tampered", CRASH_SEALED,
)
PROVENANCE_FIELDS = ("format", "file", "size", "sha256", "lacks")
PARALLEL_BYTES = 64 << 20  # a log this long or longer is read by worker processes ...
CHUNK_BYTES = 8 << 20      # ... a chunk of this many bytes at a time,
MAX_JOBS = 4               # as many as there are cores, up to this; at most 2 chunks each in flight
#: Kinds of which the walk reads nothing but seq, kind, hash and prev: a worker sends no more of them.
ISOLATION_NOTES = {"none": " (the agent could reach the keys and the session folder while it ran)",
                   "external": " (spillage proxy start: the agent was started by whoever used the proxy)"}
BARE_KINDS = frozenset({"request", "response", "beacon", "form", "egress_blocked", "error"})


@dataclass(frozen=True)
class Signed:
    """What the signatures of a log vouch for."""

    issuer: str              # fingerprint of the long-term key that certified the session key
    checkpoints: int         # signed checkpoints checked
    covered: int             # records covered by the last good checkpoint's tree head
    pinned: bool             # the issuer is the key --key named
    root: str = ""           # the last good checkpoint's root (hex)
    sealer: str | None = None  # fingerprint of who signed the seal of a crashed log
    isolation: str | None = None  # how the agent was isolated, as the certificate states it
    cosigned: bool = False   # the issuer cosigned the final checkpoint (the session's `checkpoint` note)
    bound: dict | None = None  # what the certificate binds besides the log (proxy/bound.py), checked


@dataclass(frozen=True)
class VerifyResult:
    """Outcome of `verify`.

    `count` and `head` cover the records checked good (all of them when `ok`). On failure,
    `line` is the line of the first bad record (for `truncated`, the line after the last),
    and `seq` is that record's seq, or the seq expected there when it has none.
    """

    ok: bool
    count: int
    head: str
    path: Path
    damage: str | None = None
    line: int | None = None
    seq: int | None = None
    message: str = ""
    provenance: dict | None = None   # the `import` record's file identity, for an imported log
    signed: Signed | None = field(default=None, compare=False)

    def summary(self) -> str:
        """The one line `spillage verify` prints."""
        if self.ok:
            return (f"OK {self.count} records, head {self.head}" + signed_note(self.signed, self.count)
                    + provenance_note(self.provenance))
        where = f"{self.path}:{self.line}" if self.line is not None else str(self.path)
        seq = f" seq {self.seq}:" if self.seq is not None else ""
        return f"FAIL {where}:{seq} {self.damage}: {self.message}"


def signed_note(signed: Signed | None, count: int) -> str:
    """What the signatures of a clean log cover, for its summary line."""
    if signed is None:
        return ("; unsigned: nothing but a head kept elsewhere protects it from a consistent rewrite "
                "(docs/EVIDENCE.md)")
    pin = "pinned" if signed.pinned else "not pinned: --key checks whose key it is"
    checkpoints = f"{signed.checkpoints} checkpoint" + ("s" if signed.checkpoints != 1 else "")
    cosigned = ", cosigned by its issuer" if signed.cosigned else ""
    return (f"; signed by {signed.issuer} ({pin}): {checkpoints}, the last covers all {signed.covered} records "
            f"before it{cosigned}" + isolation_note(signed.isolation) + ("" if signed.bound is not None else NOT_BOUND))


def isolation_note(isolation: str | None) -> str:
    """How the agent was isolated while the log was written, as its certificate says ('' if it does not)."""
    if isolation is None:
        return ""
    return f"; agent isolation: {isolation}" + ISOLATION_NOTES.get(isolation, "")


def provenance_note(provenance: dict | None) -> str:
    """What the chain of an imported log vouches for ('' for a log the proxy wrote)."""
    if not provenance:
        return ""
    lacks = provenance.get("lacks") or []
    return (f"; imported from {provenance['file']} ({provenance['format']}, sha256 {provenance['sha256']}): "
            "the chain and its signature vouch for the import, not for the original capture"
            + (f"; the file lacks {'; '.join(lacks)}" if lacks else ""))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _Damage(Exception):
    def __init__(self, damage: str, message: str, line: int | None, seq: int | None) -> None:
        super().__init__(message)
        self.damage, self.message, self.line, self.seq = damage, message, line, seq


class _Run(NamedTuple):
    """Lines in a row whose records are all of BARE_KINDS and whose own checks all passed (content hash,
    body, schema), each naming the one before it in `prev` with the next seq: given that the first
    passes the walk's checks, so does every other, and all they change is the count, the head, the tree
    and whether an exchange was seen. A worker sends them as this, the walk checks them at once."""

    first: tuple        # line_facts of the first
    more: int           # how many follow it
    head: str           # the hash of the last
    exchanges: bool     # one of those that follow is a request, response or egress_blocked
    leaves: bytes       # the Merkle leaves of those that follow, end to end


class _Walk:
    """The state of one pass over a log: chain, tree, signer, seal."""

    def __init__(self, log: Path, pin: str | None) -> None:
        self.log = log
        self.session = log.parent
        self.pin = pin
        self.count, self.head, self.lineno = 0, GENESIS, 0
        self.tree = MerkleFrontier()
        self.signer: dict | None = None
        self.checkpoints = 0
        self.covered = 0
        self.root = ""
        self.sealed_at: int | None = None     # line of session_end / crash_seal
        self.final_seen = False
        self.crash: dict | None = None
        self.sealer: str | None = None
        self.provenance: dict | None = None
        self.exchanges_seen = False
        self.start: dict | None = None         # the session_start record

    def record(self, facts: tuple, lineno: int) -> None:
        """Check one line given its `line_facts`, in the order the checks have always had."""
        seq, kind, digest, prev, rec, own_hash, body, schema, leaf = facts
        self.lineno = lineno
        at = seq if _is_int(seq) else self.count
        if self.sealed_at is not None and not self._final_checkpoint_due(kind):
            raise _Damage("inserted", f"record after {self._seal_kind} (line {self.sealed_at})", lineno, at)
        if own_hash is None:
            raise _Damage("modified", "the record has no canonical encoding (a lone surrogate)", lineno, at)
        if isinstance(own_hash, BaseException):
            raise own_hash
        if digest != own_hash:
            raise _Damage("modified", "hash does not match the record's content", lineno, at)
        if not _is_int(seq):
            raise _Damage("modified", f"seq is not an integer: {seq!r}", lineno, at)
        if seq < self.count:
            raise _Damage("inserted", f"seq {seq} was already used; expected {self.count}", lineno, seq)
        if seq > self.count:
            if _seq_appears_after(self.log, lineno, self.count):
                raise _Damage("reordered", f"expected seq {self.count}, found {seq}; seq {self.count} "
                              "comes later in the file", lineno, seq)
            raise _Damage("missing", f"expected seq {self.count}, found {seq}; seq {self.count} is "
                          "nowhere in the log", lineno, seq)
        if prev != self.head:
            if lineno == 1:
                raise _Damage("modified", "prev is not the genesis value", lineno, seq)
            raise _Damage("modified", f"changed and re-hashed: its hash is not what the next record's "
                          f"prev (line {lineno}) names", lineno - 1, seq - 1)
        if isinstance(body, BaseException):
            raise body
        if body:
            raise _Damage(*body, lineno, seq)
        if isinstance(schema, BaseException):
            raise schema
        if schema is not None:
            raise _Damage("malformed", f"the record does not conform to capture.schema.json: {schema}",
                          lineno, seq)
        self._kind(kind, rec, lineno, seq)
        self.tree.append(leaf)
        self.count, self.head = self.count + 1, digest

    def run(self, run: _Run, lineno: int) -> None:
        """Check a run of lines (see _Run): its first as `record` does, then the others at once."""
        self.record(run.first, lineno)
        self.tree.extend(run.leaves)
        self.lineno += run.more
        self.count += run.more
        self.head = run.head
        self.exchanges_seen = self.exchanges_seen or run.exchanges

    @property
    def _seal_kind(self) -> str:
        return "crash_seal" if self.crash else "session_end"

    def _final_checkpoint_due(self, kind: Any) -> bool:
        return self.signer is not None and not self.final_seen and kind == "checkpoint"

    def _kind(self, kind: Any, rec: dict | None, lineno: int, seq: int) -> None:
        """What a record of `kind` does to the walk; `rec` is None for BARE_KINDS."""
        if kind == "signer":
            if seq != 0:
                raise _Damage("modified", "a signer record can only open the log", lineno, seq)
            if not certificate_ok(rec):
                raise _Damage("bad signature", "the session key's certificate is not the issuer's "
                              "signature", lineno, seq)
            self.signer = rec
        elif kind == "checkpoint":
            self._checkpoint(rec, lineno, seq)
        elif kind == "session_start" and self.start is None:
            self.start = rec
        elif kind in SEAL_KINDS:
            self.sealed_at = lineno
            if kind == "crash_seal":
                self.crash = rec
        elif kind == "import" and self.provenance is None and not self.exchanges_seen:
            self.provenance = {key: rec.get(key) for key in PROVENANCE_FIELDS} | {"seq": seq}
        elif kind in ("request", "response", "egress_blocked"):
            self.exchanges_seen = True

    def _checkpoint(self, rec: dict, lineno: int, seq: int) -> None:
        if self.signer is None:
            raise _Damage("modified", "a checkpoint in a log that no signer record opens", lineno, seq)
        if rec.get("records") != self.count or rec.get("head") != self.head:
            raise _Damage("modified", f"checkpoint names {rec.get('records')!r} records; {self.count} "
                          "precede it", lineno, seq)
        root = self.tree.root().hex()
        if rec.get("root") != root:
            raise _Damage("modified", "the checkpoint's tree head is not the root of the records "
                          "before it", lineno, seq)
        key = rec.get("key")
        crash_seal = self.crash is not None and self.sealed_at is not None
        if key != self.signer["key"] and not crash_seal:
            raise _Damage("bad signature", "checkpoint signed by a key that is not the session's",
                          lineno, seq)
        message = checkpoint_message(self.signer["session"], self.count, root, str(rec.get("ts")))
        if not signature_ok(key, rec.get("signature"), message):
            raise _Damage("bad signature", "the checkpoint's signature does not verify", lineno, seq)
        if rec.get("note") is not None or self.signer.get("cosign"):
            name = origin(self.signer["session"]) if key == self.signer["key"] else long_term_name(unb64(key))
            self._note(rec.get("note"), name, key, bytes.fromhex(root), lineno, seq)
        if crash_seal:
            self.sealer = fingerprint(unb64(key))
            by = self.crash.get("by")
            claimed = by.get("key") if isinstance(by, dict) else None
            if claimed is not None and claimed != self.sealer:
                raise _Damage("bad signature", f"the crash seal says {claimed} sealed it, but {self.sealer} "
                              "signed its checkpoint", lineno, seq)
        self.checkpoints += 1
        if self.sealed_at is None or not self.crash:
            self.covered, self.root = self.count, root
        if self.sealed_at is not None:
            self.final_seen = True

    def _note(self, note: Any, name: str, key: str, root: bytes, lineno: int, seq: int) -> None:
        """The checkpoint's C2SP signed note must be its tree head, signed by its key under `name`."""
        if not isinstance(note, str):
            raise _Damage("bad signature", "the checkpoint carries no C2SP note, which its certificate's "
                          "claims promise", lineno, seq)
        try:
            parsed = parse_note(note)
        except NoteError as exc:
            raise _Damage("modified", f"the checkpoint's note: {exc}", lineno, seq) from None
        if parsed.text != checkpoint_text(self.signer["session"], self.count, root):
            raise _Damage("modified", "the checkpoint's note is not its tree head", lineno, seq)
        if note_signed(parsed, name, key) is not True:
            raise _Damage("bad signature", f"the checkpoint's note carries no valid signature of {name}",
                          lineno, seq)

    def issuer(self) -> str | None:
        return fingerprint(unb64(self.signer["issuer"]) or b"") if self.signer else None


def verify(path: str | os.PathLike[str], key: str | None = None, *, jobs: int | None = None,
           alone: bool = False) -> VerifyResult:
    """Verify the log of a session folder (or a capture.jsonl) and, if present, its meta.json and cosigned
    checkpoint; `key` pins the long-term key that must have certified the session (a fingerprint, see
    signing.pinned_fingerprint). SigningKeyError for a `key` that names no key. `alone`: the log and the files
    its certificate binds, as its runner checks them before it cosigns the log and writes meta.json.

    `jobs` worker processes read the log's lines (None: one per core, up to MAX_JOBS, for a log of
    PARALLEL_BYTES or more; 1: this process alone); the verdict is the same whatever the number."""
    pin = pinned_fingerprint(key) if key is not None else None
    log = capture_path(path)
    walk = _Walk(log, pin)

    def fail(damage: str, message: str, line: int | None, seq: int | None) -> VerifyResult:
        return VerifyResult(ok=False, count=walk.count, head=walk.head, path=log, damage=damage,
                            line=line, seq=seq, message=message, provenance=walk.provenance)

    damaged = None
    try:
        with closing(_facts(log, _jobs(log, jobs))) as items:
            for item in items:
                lineno = walk.lineno + 1
                if isinstance(item, _Run):
                    walk.run(item, lineno)
                elif isinstance(item, CaptureError):  # the line holds no record: the log is read no further
                    raise type(item)(item.message, path=log, line=lineno)
                else:
                    walk.record(item, lineno)
    except _Damage as d:
        damaged = fail(d.damage, d.message, d.line, d.seq)
    except TornLineError as exc:
        damaged = fail("torn last line", exc.message, exc.line, walk.count)
    except CaptureError as exc:
        damaged = fail("modified", exc.message, exc.line, walk.count)
    tampered = None if alone else _tampered(log.parent)
    if tampered:  # the runner's finding comes first; where the log breaks, if it does, follows
        found = f"; on disk, line {damaged.line}: {damaged.damage}: {damaged.message}" if damaged else ""
        return fail("tampered", tampered + found, damaged.line if damaged else None,
                    damaged.seq if damaged else None)
    if damaged:
        return damaged

    end = walk.lineno + 1
    if walk.sealed_at is None:
        return fail("truncated", f"log ends after {walk.count} records without session_end", end, walk.count)
    if walk.signer is not None and not walk.final_seen:
        return fail("truncated", f"sealed without its final signed checkpoint after line {walk.sealed_at}",
                    end, walk.count)
    try:
        meta = None if alone else read_meta(log.parent)
    except ValueError as exc:
        return fail("modified", str(exc), walk.count, walk.count - 1)
    checks = [_check_identity(log, walk, meta), _check_stripped(log.parent, walk, meta)]
    if not alone:   # a runner that never settled the evidence says so before meta.json, which it never finished
        checks += [_check_cosigned(log.parent, walk), _check_meta(meta, walk)]
    checks.append(_check_bound(log.parent, walk, meta, unfinished=alone))
    for problem in checks:
        if problem:
            damage, message, n = problem
            return fail(damage, message, n + 1, n)
    if pin is not None and walk.signer is None:
        return fail("unsigned", "the log has no signer record, so no key can vouch for it", 1, 0)
    if pin is not None and walk.issuer() != pin:
        return fail("wrong key", f"certified by {walk.issuer()}, not by the pinned {pin}", 1, 0)
    if walk.crash is not None:
        if pin is not None and walk.sealer != pin:
            return fail("wrong key", f"sealed after crash by {walk.sealer}, not by the pinned {pin}: "
                        + crash_message(walk), walk.sealed_at, walk.crash.get("seq"))
        return fail(CRASH_SEALED, crash_message(walk), walk.sealed_at, walk.crash.get("seq"))
    signed = None
    if walk.signer is not None:
        signed = Signed(walk.issuer() or "", walk.checkpoints, walk.covered, pin is not None, walk.root,
                        isolation=walk.signer.get("isolation"), cosigned=bool(walk.signer.get("cosign")),
                        bound=walk.signer.get("bound"))
    return VerifyResult(ok=True, count=walk.count, head=walk.head, path=log,
                        provenance=walk.provenance, signed=signed)


def crash_message(walk: _Walk) -> str:
    """What a crash seal says: who sealed (the key that signed its checkpoint, whatever the seal claims),
    why, and which records the proxy's own signatures cover."""
    crash = walk.crash or {}
    by = crash.get("by") if isinstance(crash.get("by"), dict) else {}
    who = ", ".join([f"{k} {by[k]}" for k in ("tool", "user", "host") if by.get(k)]
                    + ([f"key {walk.sealer}"] if walk.sealer else []))
    last, records = walk.covered, crash.get("records")
    after = records - last if _is_int(records) else "?"
    torn = crash.get("torn_tail")
    tail = (f"; a torn last line of {torn.get('size')} bytes was moved to {torn.get('file')}"
            if isinstance(torn, dict) else "")
    return (f"sealed by {who or 'someone'} ({crash.get('reason')}); the proxy's last signed checkpoint "
            f"covers {last} records, {after} written after it are not covered by its signature{tail}")


def _seq_appears_after(log: Path, after_line: int, seq: int) -> bool:
    """True if a record with `seq` is on a line after `after_line` (second, tolerant pass)."""
    with open(log, "rb") as f:
        for raw in itertools.islice(f, after_line, None):
            try:
                rec = json.loads(raw)
            except (ValueError, RecursionError):
                continue
            if isinstance(rec, dict) and _is_int(rec.get("seq")) and rec["seq"] == seq:
                return True
    return False


def line_facts(raw: bytes, at_end: Callable[[], bool], session: Path) -> tuple | CaptureError:
    """What the walk needs of one line as `readline(MAX_LINE_BYTES)` returned it (`at_end()`: the file
    ends after it): (seq, kind, hash, prev, the record or None for BARE_KINDS, the hash of its content
    or None when it has no canonical encoding, _check_body's finding, schema_problem's, its Merkle leaf);
    an exception one of these raised stands in its place, for the walk to raise where it always has.
    A line that holds no record gives the CaptureError (or TornLineError) reading it raises.

    A canonical line (every line a writer of ours writes) that the schema finds right is parsed and its
    hash computed by `canonical_record`; any other is read, hashed and checked as it always was."""
    line = raw[:-1]
    found = canonical_record(line, _valid_plain) if raw.endswith(b"\n") and len(raw) < MAX_LINE_BYTES else None
    if found is not None:
        (rec, own_hash), schema = found, None   # _valid_plain: the schema holds
    else:
        try:
            rec = read_line(raw, at_end)
        except CaptureError as exc:
            return exc
        own_hash = _attempt(record_hash, rec)
        if isinstance(own_hash, UnicodeEncodeError):
            own_hash = None
        schema = None if _attempt(record_valid(), rec) is True else _attempt(schema_problem, rec)  # why: if wrong
    kind, body = rec.get("kind"), rec.get("body")
    bare = type(kind) is str and kind in BARE_KINDS
    if body is None or type(body) is dict and _inline_text_ok(body):
        body_problem = None
    else:
        body_problem = _attempt(_check_body, session, body)
    return (rec.get("seq"), kind, rec.get("hash"), rec.get("prev"), None if bare else rec, own_hash,
            body_problem, schema, leaf_hash(line))


def _valid_plain(record: dict) -> bool:
    """schema.record_valid_plain: the record conforms to the schema and holds no float (False also where
    it raises: the slower reading says why)."""
    try:
        return record_valid_plain()(record)
    except Exception:  # noqa: BLE001 - the record is read again the slow way, which reports it
        return False


def _inline_text_ok(body: dict) -> bool:
    """True when `body` is inline text that matches its sha256 and size, so that _check_body finds
    nothing wrong with it (a shortcut for the common case; anything else goes to _check_body)."""
    text = body.get("text")
    if type(text) is not str or body.get("blob") is True:
        return False
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return len(data) == body.get("size") and hashlib.sha256(data).hexdigest() == body.get("sha256")


def _attempt(check: Callable[..., Any], *args: Any) -> Any:
    """check(*args), or the exception it raised, to be raised by the walk if it gets that far."""
    try:
        return check(*args)
    except Exception as exc:  # noqa: BLE001 - raised again by _Walk.record, in file order
        return exc


def _jobs(log: Path, jobs: int | None) -> int:
    if jobs is not None:
        return max(1, jobs)
    try:
        long = log.stat().st_size >= PARALLEL_BYTES
    except OSError:
        return 1  # reading it says why
    return min(len(os.sched_getaffinity(0)), MAX_JOBS) if long else 1


def _facts(log: Path, jobs: int) -> Iterator[tuple | _Run | CaptureError]:
    """_chunk_facts of every chunk of the log, in order, computed here or by `jobs` worker processes,
    chunk i by worker i % jobs, each given at most 2 chunks ahead."""
    size = log.stat().st_size
    chunks = [(start, start + CHUNK_BYTES if start + CHUNK_BYTES < size else None)
              for start in range(0, max(size, 1), CHUNK_BYTES)]
    if jobs == 1:
        for chunk in chunks:
            yield from _chunk_facts(log, *chunk)
        return
    # Worker processes of our own: forked from a process that runs no other thread (it has the modules and
    # the compiled schema already), else fork and exec (no fork of a process whose threads may hold locks);
    # never multiprocessing's (no re-import of the caller's __main__), and they may be started by a worker.
    workers: list = []
    if hasattr(os, "fork") and threading.active_count() == 1:
        record_valid_plain()   # compiled once, here, for every worker
        _scanner()
        for _ in range(jobs):
            workers.append(_Forked(log, workers))
    else:
        argv = [sys.executable, "-c", "from spillage.proxy.verify import serve_chunks; serve_chunks()", str(log)]
        workers = [subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE) for _ in range(jobs)]

    def give(i: int) -> None:
        if i < len(chunks):
            pickle.dump(chunks[i], workers[i % jobs].stdin)
            workers[i % jobs].stdin.flush()

    try:
        for i in range(2 * jobs):
            give(i)
        for i in range(len(chunks)):
            try:
                done = pickle.load(workers[i % jobs].stdout)
            except EOFError:
                raise RuntimeError(f"a verify worker exited with {workers[i % jobs].wait()}") from None
            give(i + 2 * jobs)
            if isinstance(done, BaseException):
                raise done
            yield from done
    finally:  # done, or stopped early (damage found): the workers stop where they are
        for worker in workers:
            worker.kill()
            worker.wait()
            worker.stdin.close()
            worker.stdout.close()


class _Forked:
    """A verify worker forked from this process (which runs no other thread), with the `stdin`, `stdout`,
    `kill` and `wait` of a Popen, as _facts uses them."""

    def __init__(self, log: Path, others: list) -> None:
        into, to_worker = os.pipe()
        from_worker, out = os.pipe()
        self.pid, self.returncode = os.fork(), None
        if self.pid == 0:  # the worker: it keeps its own ends only, so that each worker sees its input end
            try:
                os.close(to_worker)
                os.close(from_worker)
                for other in others:
                    os.close(other.stdin.fileno())
                    os.close(other.stdout.fileno())
                _serve(log, os.fdopen(into, "rb"), os.fdopen(out, "wb"))
            finally:
                os._exit(0)   # nothing of the parent's runs here: no atexit, no buffer of its flushed
        os.close(into)
        os.close(out)
        self.stdin, self.stdout = os.fdopen(to_worker, "wb"), os.fdopen(from_worker, "rb")

    def kill(self) -> None:
        if self.returncode is None:
            os.kill(self.pid, signal.SIGKILL)

    def wait(self) -> int:
        if self.returncode is None:
            self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        return self.returncode


def serve_chunks() -> None:
    """A verify worker started by exec: the log is argv[1], chunks come on stdin (see _serve)."""
    _serve(Path(sys.argv[1]), sys.stdin.buffer, sys.stdout.buffer)


def _serve(log: Path, stdin, stdout) -> None:
    """Read (start, end) chunks of `log` from `stdin`, pickled, and write back their _chunk_facts (or the
    exception that stopped one), until `stdin` closes."""
    while True:
        try:
            start, end = pickle.load(stdin)
        except EOFError:
            return
        try:
            done: Any = _chunk_facts(log, start, end)
        except Exception as exc:  # noqa: BLE001 - raised in the walk's process
            done = exc
        pickle.dump(done, stdout, protocol=pickle.HIGHEST_PROTOCOL)
        stdout.flush()


def _chunk_facts(log: Path, start: int, end: int | None) -> list[tuple | _Run | CaptureError]:
    """line_facts of the lines that start at or after byte `start` of the log and before `end` (None:
    to the end of the file), the last read whole, lines in a row that can be checked at once made a
    _Run; nothing after a line that holds no record. The chunk is read at once, and its lines are given to
    the C pass (linecheck), which takes those it finds clean; line_facts reads the others."""
    runs = _Runs()
    session = log.parent
    with open(log, "rb", buffering=1 << 20) as f:
        if start:
            f.seek(start - 1)
            if f.read(1) != b"\n":  # inside a line, the previous chunk's: skip to the next
                piece = f.readline(MAX_LINE_BYTES)
                while piece and not piece.endswith(b"\n"):
                    piece = f.readline(MAX_LINE_BYTES)
        at = f.tell()
        data = f.read(CHUNK_BYTES if end is None else max(end - at, 0))
        whole = data.rfind(b"\n") + 1   # the complete lines; the one the chunk's end cuts is read below
        more = len(data) > whole
        if _lines(data, whole, lambda: not more and not f.peek(1), session, runs):
            at += whole
            f.seek(at)
            while end is None or at < end:
                raw = f.readline(MAX_LINE_BYTES)
                at += len(raw)
                if not raw or not _lines(raw, len(raw), lambda: not f.peek(1), session, runs):
                    break
    runs.close()
    return runs.out


def _lines(data: bytes, stop: int, at_end: Callable[[], bool], session: Path, runs: _Runs) -> bool:
    """Add to `runs` the facts of the lines of data[:stop], each as `readline` returns it (`at_end()`: the
    file ends after the last); False when one holds no record (then nothing after it is added). The C pass
    takes the lines it finds clean, a run at a time; line_facts reads each other line (every line, when
    the extension was not built)."""
    scan = _scanner()
    pos = 0
    while pos < stop:
        if scan is not None:
            pos, groups = scan(data, pos)
            for group in groups:
                runs.lines(*group)
            if pos >= stop:
                break
        line_end = data.find(b"\n", pos, stop) + 1 or stop
        if not runs.line(line_facts(data[pos:line_end], at_end if line_end == stop else _NEVER, session)):
            return False
        pos = line_end
    return True


def _scanner() -> Callable[[bytes, int], tuple[int, list]] | None:
    return scanner(BARE_KINDS, EXCHANGE_KINDS)


EXCHANGE_KINDS = frozenset({"request", "response", "egress_blocked"})
_NEVER = lambda: False  # noqa: E731 - at_end of a line that others follow


class _Runs:
    """The items of a chunk as _chunk_facts returns them: each line's facts, a line's CaptureError, and
    clean lines in a row (see _Run) made one _Run, which grows by a line or by many at once."""

    def __init__(self) -> None:
        self.out: list[tuple | _Run | CaptureError] = []
        self.first: tuple | None = None   # the open run's first line's facts
        self.leaves: list[bytes] = []     # ... the leaves of the others
        self.more = 0
        self.exchanges = False
        self.seq: Any = None              # seq and hash of the last line
        self.head: Any = None

    def close(self) -> None:
        if self.first is not None:
            self.out.append(_Run(self.first, self.more, self.head, self.exchanges, b"".join(self.leaves)))
            self.first = None

    def line(self, facts: tuple | CaptureError) -> bool:
        """Add one line's facts; False for a line that holds no record (nothing may follow it)."""
        if isinstance(facts, CaptureError):
            self.close()
            self.out.append(facts)
            return False
        seq, kind, digest, prev, rec, own_hash, body, schema, leaf = facts
        clean = (rec is None and type(own_hash) is str and own_hash == digest and body is None
                 and schema is None and type(seq) is int)
        if clean and self.first is not None and seq == self.seq + 1 and prev == self.head:
            self.leaves.append(leaf)
            self.more += 1
            self.exchanges = self.exchanges or kind in EXCHANGE_KINDS
        else:
            self.close()
            if clean:
                self.first, self.leaves, self.more, self.exchanges = facts, [], 0, False
            else:
                self.out.append(facts)
        self.seq, self.head = seq, digest
        return True

    def lines(self, first: tuple, leaves: bytes, more: int, exchanges: bool, seq: int, head: str) -> None:
        """Add clean lines in a row: the first's facts, then `more` others (their leaves end to end, whether
        one is an exchange, the seq and hash of the last)."""
        self.line(first)
        self.leaves.append(leaves)
        self.more += more
        self.exchanges = self.exchanges or exchanges
        self.seq, self.head = seq, head


def _check_body(session: Path, body: Any) -> tuple[str, str] | None:
    """(damage, message) for a body that does not match its bytes, else None."""
    if body is None:
        return None
    if not isinstance(body, dict):
        return "modified", "body is not an object"
    digest = body.get("sha256")
    if not is_sha256(digest):
        return "modified", f"body sha256 is not a SHA-256 hex digest: {digest!r}"
    if body.get("blob") is not True:
        try:
            read_body(session, body)
        except CaptureError as exc:
            return "modified", f"inline body: {exc.message}"
        return None
    blob = blob_path(session, digest)
    try:
        with open(blob, "rb") as f:
            actual = hashlib.file_digest(f, "sha256").hexdigest()
            size = f.tell()
    except FileNotFoundError:
        return "blob missing", f"{BLOB_DIR}/{digest} does not exist"
    if actual != digest:
        return "blob altered", f"{BLOB_DIR}/{digest} hashes to {actual}"
    if size != body.get("size"):
        return "blob altered", f"{BLOB_DIR}/{digest} has {size} bytes, record {body.get('size')}"
    return None


def _tampered(session: Path) -> str | None:
    """The runner's finding, in meta.json, that the log on disk is not what the proxy reported."""
    try:
        meta = read_meta(session)
    except ValueError:
        return None  # reported by _check_meta
    if meta and meta.get("tampered"):
        return f"the runner found the log differing from what the proxy reported: {meta['tampered']}"
    return None


def _check_identity(log: Path, walk: _Walk, meta: dict | None) -> tuple[str, str, int] | None:
    """(damage, why, 0) when the session the log's signer names is not the folder it lies in, or not the
    one meta.json names, or meta.json names other keys than the log."""
    found = identity(log.parent.name, walk.signer, meta)
    return (*found, 0) if found else None


def identity(folder: str, signer: dict | None, meta: dict | None) -> tuple[str, str] | None:
    """("wrong session" or "wrong key", why) when a signed log's `signer` record, the name of its `folder`
    and its `meta` (meta.json) do not name the same session and keys."""
    if signer is None:
        return None
    signed = signer.get("session")
    if signed != folder:
        return "wrong session", f"these are the files of session {signed} (the name its key is certified for), not of {folder}"
    named = meta.get("session") if meta else None
    if named is not None and named != signed:
        return "wrong session", f"meta.json names session {named!r}; the log is session {signed}'s"
    signing = meta.get("signing") if meta else None
    issuer = fingerprint(unb64(signer.get("issuer")) or b"")
    if isinstance(signing, dict) and signing.get("key") and signing["key"] != issuer:
        return "wrong key", f"meta.json names signing key {signing['key']}; the log's is {issuer}"
    if isinstance(signing, dict) and signing.get("session_key") and signing["session_key"] != signer.get("key"):
        return "wrong key", "meta.json names another session key than the log's signer record"
    return None


def identity_problem(session: Path) -> str | None:
    """Why a session's signed name, its signer and its meta.json disagree (None when they agree), read from
    the log's first record and meta.json alone: what a command reading many sessions checks of each."""
    try:
        signer = signer_record(session)
        meta = read_meta(session)
    except (CaptureError, ValueError) as exc:
        return str(exc)
    found = identity(Path(session).name, signer, meta)
    return found[1] if found else None


def signer_record(session: Path) -> dict | None:
    """The `signer` record that opens the session's log (None when another record or none does)."""
    first = next(iter(iter_records(session)), None)
    return first.record if first is not None and first.record.get("kind") == "signer" else None


def signed_issuer(session: Path) -> str | None:
    """The fingerprint of the key the session's signer record names as its issuer (None when it has none or
    the log cannot be read), whether or not the log verifies."""
    try:
        signer = signer_record(session)
    except CaptureError:
        return None
    return fingerprint(unb64(signer.get("issuer")) or b"") if signer else None


def _check_meta(meta: dict | None, walk: _Walk) -> tuple[str, str, int] | None:
    """(damage, message, index of the record at issue) if meta.json disagrees with the log, or is missing
    or stripped of its head where the log's certificate says its issuer cosigns (it writes meta.json)."""
    count, head = walk.count, walk.head
    required = walk.signer is not None and walk.signer.get("cosign") and walk.crash is None
    if meta is None:
        return ("modified", "meta.json is missing; the runner that cosigns this log writes it with the head "
                "it sealed", count - 1) if required else None
    isolation = meta.get("isolation")
    claimed = walk.signer.get("isolation") if walk.signer else None
    if claimed is not None and (not isinstance(isolation, dict) or isolation.get("level") != claimed):
        level = isolation.get("level") if isinstance(isolation, dict) else None
        return "modified", f"meta.json says the agent's isolation was {level!r}; the certificate says {claimed!r}", 0
    sealed = meta.get("capture")
    if sealed is None:
        return ("modified", "meta.json has no capture entry; the runner that cosigns this log records the "
                "sealed head there", count - 1) if required else None
    records = sealed.get("records") if isinstance(sealed, dict) else None
    if not _is_int(records) or not is_sha256(sealed.get("head")):
        return "modified", "meta.json: capture must be {records: int, head: sha256}", count - 1
    if records > count:
        return "truncated", f"meta.json sealed {records} records, the log has {count}", count
    if records < count:
        return "inserted", f"meta.json sealed {records} records, the log has {count}", records
    if sealed["head"] != head:
        return "modified", f"meta.json sealed head {sealed['head']}, the log's is {head}", count - 1
    signed_head = sealed.get("signed_head")
    if required and (not isinstance(signed_head, dict) or signed_head.get("root") != walk.root
                     or signed_head.get("tree_size") != walk.covered):
        return "modified", "meta.json's signed head is not the log's final checkpoint", count - 1
    return None


def _check_bound(session: Path, walk: _Walk, meta: dict | None, unfinished: bool) -> tuple[str, str, int] | None:
    """("modified", why, 0) when the files and meta.json fields the certificate binds (proxy/bound.py) are
    not what it says; a crash-sealed log too (its audit reads them as well). `unfinished`: meta.json is
    not written yet (the runner settling the evidence), so only the files are checked."""
    if walk.signer is None or "bound" not in walk.signer:
        return None
    problem = bound_problem(session, walk.signer["bound"], meta, unfinished=unfinished or walk.crash is not None)
    return ("modified", problem, 0) if problem else None


def _check_stripped(session: Path, walk: _Walk, meta: dict | None) -> tuple[str, str, int] | None:
    """("bad signature", why, 0) for a log without a signer record whose first records, meta.json or
    cosigned checkpoint say it was signed: its signatures were stripped."""
    if walk.signer is not None:
        return None
    options = walk.start.get("options") if walk.start else None
    signing = meta.get("signing") if meta else None
    if isinstance(options, dict) and options.get("signed") is True:
        said = "its session_start record says it is signed"
    elif isinstance(signing, dict) and signing.get("key"):
        said = f"meta.json names its signing key {signing['key']}"
    elif (session / CHECKPOINT_NOTE).exists():
        said = f"a cosigned {CHECKPOINT_NOTE} lies beside it"
    else:
        return None
    return "bad signature", f"the log carries no signer record and no signature, but {said}: they were stripped", 0


def _check_cosigned(session: Path, walk: _Walk) -> tuple[str, str, int] | None:
    """(damage, why, index of the last record) unless the session's `checkpoint.note` is the log's final
    checkpoint, cosigned by the issuer, where the log's certificate says the issuer cosigns it (a crash
    seal's checkpoint is signed by its sealer's long-term key already)."""
    if walk.signer is None or not walk.signer.get("cosign") or walk.crash is not None:
        return None
    last = walk.count - 1
    try:
        text = read_checkpoint_note(session)
    except ValueError as exc:
        return "modified", str(exc), last
    if text is None:
        return "not cosigned", (f"{CHECKPOINT_NOTE} is missing: the runner cosigns the final checkpoint once it "
                                "has checked the log against the proxy's reports, and did not (it was stopped "
                                f"first; the proxy's own signatures cover all {walk.covered} records), or the file "
                                "was removed"), last
    try:
        note = parse_note(text)
    except NoteError as exc:
        return "modified", f"{CHECKPOINT_NOTE}: {exc}", last
    if note.text != checkpoint_text(walk.signer["session"], walk.covered, bytes.fromhex(walk.root)):
        return "modified", f"{CHECKPOINT_NOTE} is not the log's final checkpoint (of {walk.covered} records)", last
    issuer = walk.signer["issuer"]
    if note_signed(note, long_term_name(unb64(issuer)), issuer) is not True:
        return "not cosigned", f"{CHECKPOINT_NOTE} carries no valid signature of the issuer {walk.issuer()}", last
    return None
