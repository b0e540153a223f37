"""The capture log (docs/CAPTURE_FORMAT.md): canonical records, an append-only writer that keeps a
Merkle tree head over them and signs checkpoints, a streaming reader.

No mitmproxy here: audits and verification read logs on machines without it.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import os
import re
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType
from typing import Any, Callable, Iterator

import orjson

from spillage.proxy.documents import finite_float
from spillage.proxy.layout import BLOB_DIR
from spillage.proxy.layout import LOG_NAME
from spillage.proxy.layout import WRITING_MODE
from spillage.proxy.layout import blob_path
from spillage.proxy.layout import capture_path
from spillage.proxy.merkle import MerkleFrontier
from spillage.proxy.merkle import leaf_hash
from spillage.proxy.notes import Note
from spillage.proxy.notes import checkpoint_text
from spillage.proxy.signing import CLAIMS
from spillage.proxy.signing import SessionKey
from spillage.proxy.signing import Signer
from spillage.proxy.signing import checkpoint_message

FORMAT_VERSION = 2
GENESIS = "0" * 64
DEFAULT_INLINE_LIMIT = 64 * 1024
MAX_INLINE_LIMIT = 4 << 20   # bodies above this go to blobs whatever the option says, so that
MAX_LINE_BYTES = 64 << 20    # no record line (escaping grows text up to 6 times) ever reaches this
DEFAULT_CHECKPOINT_EVERY = 256      # records between signed checkpoints ...
DEFAULT_CHECKPOINT_INTERVAL = 1.0   # ... or seconds, whichever comes first
# The lines the proxy prints for the runner, after each signed checkpoint and at the seal (the
# head it reports over its output pipe, which the agent cannot write: runner/heads.py reads them).
CHECKPOINT_PREFIX = "spillage checkpoint "
SEALED_PREFIX = "spillage sealed "
SCHEMA_PATH = Path(__file__).with_name("capture.schema.json")

#: Fields the caller passes to `CaptureWriter.append`, per kind (the common ones are the writer's).
KIND_FIELDS: dict[str, tuple[str, ...]] = {
    "session_start": ("session", "tool", "options"),
    "import": ("format", "file", "size", "sha256", "counts", "lacks"),
    "request": ("flow", "method", "url", "http_version", "headers", "body"),
    "response": ("flow", "request", "status", "reason", "http_version", "headers", "body"),
    "beacon": ("flow", "request", "url", "event", "data"),
    "form": ("flow", "request", "url", "method", "enctype", "fields"),
    "egress_blocked": (
        "flow", "method", "url", "host", "port", "background", "headers", "body", "reason",
    ),
    "error": ("flow", "request", "message"),
    "guard": ("flow", "request", "mode", "action", "enforced", "observer", "rule", "findings", "original",
              "original_sha256", "sent_sha256"),
    "signer": ("session", "key", "issuer", "issued", "certificate"),
    "checkpoint": ("records", "head", "root", "key", "signature"),
    "session_end": ("reason", "records"),
    "crash_seal": ("reason", "records", "by", "last_signed", "torn_tail"),
}
#: Fields the writer adds to its own kinds in logs written since they exist: the claims a session key's
#: certificate states (signing.CLAIMS), and a checkpoint's C2SP signed note (proxy/notes.py).
OPTIONAL_FIELDS: dict[str, tuple[str, ...]] = {"signer": CLAIMS, "checkpoint": ("note",)}
#: Kinds only the writer itself appends (a signed log's first record, its checkpoints).
WRITER_KINDS = frozenset({"signer", "checkpoint"})
#: Kinds that seal a log: after one, a signed log takes only its final checkpoint, then nothing.
SEAL_KINDS = frozenset({"session_end", "crash_seal"})
KINDS: tuple[str, ...] = tuple(KIND_FIELDS)
COMMON_FIELDS = ("v", "seq", "ts", "kind", "prev", "hash")
_KIND_FIELD_SETS = {kind: frozenset(names) for kind, names in KIND_FIELDS.items()}
_COMMON_FIELD_SET = frozenset(COMMON_FIELDS)

_HEX64 = re.compile(r"[0-9a-f]{64}")


class CaptureError(Exception):
    """A capture log that cannot be read or continued; names the file and line."""

    def __init__(
        self,
        message: str,
        *,
        path: str | os.PathLike[str] | None = None,
        line: int | None = None,
        seq: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = " ".join(message.splitlines())
        self.path = Path(path) if path is not None else None
        self.line = line
        self.seq = seq

    def __str__(self) -> str:
        if self.path is None:
            return self.message
        where = f"{self.path}:{self.line}" if self.line is not None else str(self.path)
        return f"{where}: {self.message}"


class TornLineError(CaptureError):
    """The last line of the log is incomplete (no newline, or not complete JSON)."""


@dataclass(frozen=True)
class Line:
    """One record of a log, the (1-based) line it was read from, and that line's bytes (no newline)."""

    lineno: int
    record: dict[str, Any]
    raw: bytes = b""


def canonical_json(obj: Any) -> bytes:
    """The canonical JSON encoding of `obj` (sorted keys, no whitespace, UTF-8): the bytes of
    `json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)`.

    orjson writes those same bytes, several times faster, for values made only of dicts with string keys,
    lists, tuples, strings, integers in its 64-bit range, booleans and None (`_plain`; proved on every
    record kind and hostile strings in tests/test_canonical.py). Anything else (a float, whose
    exponent orjson writes its own way; a big integer; a lone surrogate; deeper nesting than orjson
    takes; another type) is encoded, or refused, by the standard library as it always was.
    """
    try:
        plain = _plain(obj)
    except RecursionError:
        plain = False
    if plain:
        try:
            return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:  # a lone surrogate, or nesting orjson refuses: the stdlib decides
            pass
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


_INT_MIN, _INT_MAX = -(1 << 63), (1 << 64) - 1   # the integers orjson encodes


def _plain(obj: Any) -> bool:
    """True if `obj` holds only values orjson encodes exactly as `json.dumps` does (see canonical_json)."""
    kind = type(obj)
    if kind is dict:
        for key in obj:
            if type(key) is not str:
                return False
        values = obj.values()
    elif kind is list or kind is tuple:
        values = obj
    else:
        return kind is str or kind is bool or obj is None or (kind is int and _INT_MIN <= obj <= _INT_MAX)
    for value in values:
        kind = type(value)
        if kind is str or kind is bool or value is None:
            continue
        if kind is list:  # two levels more here: lists of lists of strings (headers, form fields) are common
            for item in value:
                kind = type(item)
                if kind is str:
                    continue
                if kind is list:
                    for leaf in item:
                        if type(leaf) is not str and not _plain(leaf):
                            return False
                elif not _plain(item):
                    return False
        elif not _plain(value):
            return False
    return True


def _float_free(value: dict | list) -> bool:
    """`_plain` for what orjson.loads returned: only dicts with string keys, lists, strings, booleans, None,
    integers in orjson's range (a larger number comes back a float) and floats, so such a value is plain
    exactly when it holds no float; found without looking at keys or integers again (verify asks it of
    every line)."""
    for item in (value.values() if type(value) is dict else value):
        kind = type(item)
        if kind is float:
            return False
        if kind is list:  # one level unrolled: lists of lists of strings (headers, form fields) are common
            for leaf in item:
                kind = type(leaf)
                if kind is float or (kind is list or kind is dict) and not _float_free(leaf):
                    return False
        elif kind is dict and not _float_free(item):
            return False
    return True


def splice(head: bytes, tail: bytes, member: bytes = b"") -> bytes:
    """The canonical JSON of an object from the canonical JSON of two objects, `head` and `tail`, and
    optionally one canonical member `"key":value`, whose keys sort in that order: sorted keys make an
    object's encoding the concatenation of its members', so an object need only be encoded once to
    give both a record's line and the content its hash covers (the record without `hash`)."""
    return b"{" + b",".join(part for part in (head[1:-1], member, tail[1:-1]) if part) + b"}"


def record_hash(record: dict[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of `record` without its `hash` field."""
    content = {k: v for k, v in record.items() if k != "hash"}
    return hashlib.sha256(canonical_json(content)).hexdigest()


def utc_timestamp() -> str:
    """The current UTC time as `2026-11-29T12:00:00.123456Z`."""
    # isoformat, not strftime: the same text, without the C library's strftime (and its tzset) per record
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")[:-6] + "Z"


def is_sha256(value: Any) -> bool:
    """True if `value` is a lowercase 64-digit hex string (a hash, a blob name)."""
    return isinstance(value, str) and _HEX64.fullmatch(value) is not None


def iter_records(path: str | os.PathLike[str]) -> Iterator[Line]:
    """Yield the records of a log one line at a time.

    Raises `TornLineError` for a last line without newline or not valid JSON, and
    `CaptureError` for any other line that is not a JSON object or is MAX_LINE_BYTES or longer
    (no writer of ours writes one: it is refused before it is read whole).
    """
    log = capture_path(path)
    with open(log, "rb") as f:
        for lineno, raw in enumerate(iter(lambda: f.readline(MAX_LINE_BYTES), b""), start=1):
            yield Line(lineno, read_line(raw, lambda: not f.peek(1), log, lineno), raw[:-1])


def read_line(raw: bytes, at_end: Callable[[], bool], path: Path | None = None,
              lineno: int | None = None) -> dict[str, Any]:
    """The record on one line of a log as `readline(MAX_LINE_BYTES)` returned it (newline included);
    `at_end()` says whether the file ends after it. TornLineError or CaptureError (naming `path` and
    `lineno`) for a line that holds no record (see iter_records)."""
    if len(raw) >= MAX_LINE_BYTES:
        raise CaptureError(f"not a record: the line is {MAX_LINE_BYTES} bytes or longer",
                           path=path, line=lineno)
    if not raw.endswith(b"\n"):
        raise TornLineError("last line is torn: no newline at end of file", path=path, line=lineno)
    try:
        record = _parse_line(raw)
    except RecursionError:
        raise CaptureError("not a JSON record: nested too deeply", path=path, line=lineno) from None
    except ValueError as exc:
        if at_end():
            raise TornLineError(
                f"last line is torn: not complete JSON ({exc})", path=path, line=lineno
            ) from exc
        raise CaptureError(f"not a JSON record: {exc}", path=path, line=lineno) from exc
    if not isinstance(record, dict):
        raise CaptureError("not a JSON record: not an object", path=path, line=lineno)
    return record


def canonical_record(line: bytes, plain: Callable[[dict], bool] = _float_free) -> tuple[dict[str, Any], str] | None:
    """The record on `line` (no newline) and its `record_hash`, when the line is the canonical JSON of
    a record orjson encodes as the contract does (`_plain`); None for any other line. `plain` is asked
    whether the parsed record holds no float (a stricter test may be given: verify's also asks the
    schema, so that a line it finds wrong is read the slow way).

    Then the line's bytes are what `read_line` and `record_hash` would read and hash: a canonical line
    has no duplicate key, no escape but the ones canonical JSON writes, no float, and orjson and the
    standard library parse it to the same values. What the hash covers is the line without its `hash`
    member (and a comma): sorted keys make an object's encoding the concatenation of its members'.
    """
    try:
        record = orjson.loads(line)
        if type(record) is not dict or not plain(record):
            return None
        if orjson.dumps(record, option=orjson.OPT_SORT_KEYS) != line:
            return None
        if "hash" not in record:
            return record, hashlib.sha256(line).hexdigest()
        member = b'"hash":' + orjson.dumps(record["hash"], option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONDecodeError, orjson.JSONEncodeError, RecursionError):
        return None
    # In canonical JSON a `"` inside a string is escaped: the member's bytes can only be a "hash" key and
    # its value. Found once, they are the record's own member (an object inside may hold another).
    start = line.find(member)
    if line.find(member, start + 1) != -1:
        return None
    end = start + len(member)
    if line[start - 1] == 0x2C:  # a comma before it
        start -= 1
    elif line[end] == 0x2C:      # the first member: the comma after it
        end += 1
    view = memoryview(line)
    digest = hashlib.sha256(view[:start])
    digest.update(view[end:])
    return record, digest.hexdigest()


def read_body(session_dir: str | os.PathLike[str], body: dict[str, Any] | None) -> bytes:
    """The bytes of a body object (inline or blob), checked against its sha256 and size."""
    if body is None:
        return b""
    digest = body.get("sha256")
    if not is_sha256(digest):
        raise CaptureError(f"body sha256 is not a SHA-256 hex digest: {digest!r}")
    try:
        if body.get("blob") is True:
            blob = blob_path(capture_path(session_dir).parent, digest)
            try:
                data = blob.read_bytes()
            except FileNotFoundError:
                raise CaptureError("blob missing", path=blob) from None
        elif "text" in body:
            data = body["text"].encode("utf-8")
        else:
            data = base64.b64decode(body["base64"], validate=True)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise CaptureError(f"malformed body object: {exc!r}") from exc
    if hashlib.sha256(data).hexdigest() != digest or len(data) != body.get("size"):
        raise CaptureError(f"body {digest} does not match its sha256 or size")
    return data


def _parse_line(raw: bytes) -> Any:
    return json.loads(
        raw.decode("utf-8"), object_pairs_hook=_unique_keys, parse_constant=_no_constant,
        parse_float=finite_float,   # 1e400 is no number a record can hold: the line is malformed
    )


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise ValueError("duplicate key in object")
    return obj


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _write_all(fd: int, data: bytes) -> None:
    # One write for the whole line; the loop only matters if the kernel writes short.
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class ChainState:
    """Where an intact, unsealed log ends: its record count, head, Merkle frontier, session name, and how
    many records its last checkpoint covers."""

    count: int
    head: str
    frontier: MerkleFrontier
    session: str | None
    signed: bool = False
    last_signed: int = 0


def intact_chain(path: str | os.PathLike[str]) -> ChainState:
    """The state of a log whose chain is intact and which is not sealed, else CaptureError (naming the
    line) — what a writer needs to continue it."""
    log = capture_path(path)
    count, head, frontier, session, signed, last_signed = 0, GENESIS, MerkleFrontier(), None, False, 0
    for line in iter_records(log):
        rec = line.record
        seq = rec.get("seq")
        digest = _safe_hash(rec)
        if digest is None or rec.get("hash") != digest or seq != count or rec.get("prev") != head:
            raise CaptureError("hash chain is broken here (run `spillage verify` for details)",
                               path=log, line=line.lineno, seq=seq if isinstance(seq, int) else None)
        if rec.get("kind") in SEAL_KINDS:
            raise CaptureError(f"log is sealed by {rec['kind']}", path=log, line=line.lineno, seq=seq)
        if rec.get("kind") in ("signer", "session_start") and session is None:
            session = rec.get("session") if isinstance(rec.get("session"), str) else None
        signed = signed or rec.get("kind") == "signer"
        if rec.get("kind") == "checkpoint" and isinstance(rec.get("records"), int):
            last_signed = rec["records"]
        frontier.append(leaf_hash(line.raw))
        count, head = count + 1, digest
    return ChainState(count, head, frontier, session, signed, last_signed)


def _safe_hash(record: dict[str, Any]) -> str | None:
    """record_hash, or None for a record that has no canonical encoding (a lone surrogate)."""
    try:
        return record_hash(record)
    except UnicodeEncodeError:
        return None


OnCheckpoint = Callable[[dict[str, Any], bool], None]


class CaptureWriter:
    """Append-only writer of one session's capture log and blobs.

    Each record is one `os.write` of one whole line to a file opened with O_APPEND (0600). A signed
    writer (`signing`: the session key and its certificate) opens the log with a `signer` record, keeps
    the RFC 9162 Merkle tree head over every line, and appends a signed `checkpoint` every
    `checkpoint_every` records or `checkpoint_interval` seconds while records arrive, and after the
    record that seals the log. `on_checkpoint(record, final)` is called after each one is written.
    A daemon thread fsyncs the log every `fsync_interval` seconds while records arrive, and `close`
    fsyncs it. `append` and `body` are thread-safe.
    """

    def __init__(
        self,
        session_dir: str | os.PathLike[str],
        *,
        inline_limit: int = DEFAULT_INLINE_LIMIT,
        fsync_interval: float = 1.0,
        signing: SessionKey | None = None,
        checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY,
        checkpoint_interval: float = DEFAULT_CHECKPOINT_INTERVAL,
        on_checkpoint: OnCheckpoint | None = None,
    ) -> None:
        """Start a new log in `session_dir`; refuses an existing non-empty capture.jsonl."""
        state = ChainState(0, GENESIS, MerkleFrontier(), signing.session if signing else None)
        self._start(Path(session_dir), state, signing.signer() if signing else None, create=True,
                    inline_limit=inline_limit, fsync_interval=fsync_interval,
                    checkpoint_every=checkpoint_every, checkpoint_interval=checkpoint_interval,
                    on_checkpoint=on_checkpoint)
        if signing is not None:
            self._write_locked_and_notify("signer", signing.record_fields())

    @classmethod
    def resume(cls, session_dir: str | os.PathLike[str], signer: Signer | None = None,
               **kw: Any) -> CaptureWriter:
        """Continue an existing, intact, unsealed log (refuses a torn last line); `signer` signs the
        checkpoints it appends (`spillage seal` passes the sealer's long-term key)."""
        session_dir = Path(session_dir)
        log = session_dir / LOG_NAME
        if not log.is_file():
            raise CaptureError("cannot resume: no capture log here", path=log)
        try:
            state = intact_chain(log)
        except CaptureError as exc:
            raise type(exc)(f"cannot resume: {exc.message}", path=exc.path, line=exc.line,
                            seq=exc.seq) from exc
        writer = cls.__new__(cls)
        writer._start(session_dir, state, signer, create=False, **kw)
        return writer

    def _start(
        self,
        session_dir: Path,
        state: ChainState,
        signer: Signer | None,
        *,
        create: bool,
        inline_limit: int = DEFAULT_INLINE_LIMIT,
        fsync_interval: float = 1.0,
        checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY,
        checkpoint_interval: float = DEFAULT_CHECKPOINT_INTERVAL,
        on_checkpoint: OnCheckpoint | None = None,
    ) -> None:
        if not 0 <= inline_limit <= MAX_INLINE_LIMIT:
            raise ValueError(f"inline_limit must be in [0, {MAX_INLINE_LIMIT}]")
        if not fsync_interval > 0 or not checkpoint_interval > 0:
            raise ValueError("fsync_interval and checkpoint_interval must be > 0")
        if checkpoint_every < 1:
            raise ValueError("checkpoint_every must be >= 1")
        self.session_dir = session_dir
        self.path = session_dir / LOG_NAME
        self.blob_dir = session_dir / BLOB_DIR
        self.inline_limit = inline_limit
        self._seq, self._head = state.count, state.head
        self._tree = state.frontier
        self._session = state.session or session_dir.name
        self._signer = signer
        self._checkpoint_every = checkpoint_every
        self._checkpoint_interval = checkpoint_interval
        self._on_checkpoint = on_checkpoint
        self._since_checkpoint = 0
        self._last_checkpoint = time.monotonic()
        self._sealed = False
        self._failed: BaseException | None = None
        self._dirty = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.blob_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._fd: int | None = self._open_new() if create else os.open(
            self.path, os.O_WRONLY | os.O_APPEND
        )
        try:  # the writer's exclusive hold: `spillage seal` refuses a log that is still written
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise CaptureError("another writer holds this log", path=self.path) from None
        if create:
            _fsync_dir(session_dir)
        self._thread = threading.Thread(
            target=self._sync_loop, args=(min(fsync_interval, checkpoint_interval),),
            name="capture-fsync", daemon=True,
        )
        self._thread.start()

    def _open_new(self) -> int:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        try:
            return os.open(self.path, flags | os.O_EXCL, WRITING_MODE)
        except FileExistsError:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
            if os.fstat(fd).st_size == 0:
                return fd
            os.close(fd)
            raise CaptureError(
                "capture log already exists and is not empty; refusing to overwrite it "
                "(use CaptureWriter.resume to continue it)",
                path=self.path,
            ) from None

    @property
    def seq(self) -> int:
        """The seq the next record will get."""
        return self._seq

    @property
    def count(self) -> int:
        """Number of records in the log."""
        return self._seq

    @property
    def head(self) -> str:
        """Hash of the last record (GENESIS for an empty log)."""
        return self._head

    @property
    def signed(self) -> bool:
        """True when this writer signs checkpoints."""
        return self._signer is not None

    @property
    def sealed(self) -> bool:
        """True once `session_end` (or `crash_seal`) has been written."""
        return self._sealed

    @property
    def closed(self) -> bool:
        """True once `close` has run."""
        return self._fd is None

    def append(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Write one record of `kind` with `fields` (exactly `KIND_FIELDS[kind]`); return it. A record
        that seals the log is followed by the final checkpoint of a signed log."""
        expected = _KIND_FIELD_SETS.get(kind)
        if expected is None:
            raise ValueError(f"unknown record kind {kind!r}")
        if kind in WRITER_KINDS:
            raise ValueError(f"{kind} records are written by the writer itself")
        if expected.symmetric_difference(fields):
            reserved = sorted(_COMMON_FIELD_SET.intersection(fields))
            if reserved:
                raise ValueError(f"fields set by the writer cannot be passed: {', '.join(reserved)}")
            missing = ", ".join(sorted(expected - set(fields))) or "-"
            extra = ", ".join(sorted(set(fields) - expected)) or "-"
            raise ValueError(f"{kind} record: missing fields: {missing}; unknown fields: {extra}")
        if kind in SEAL_KINDS and fields["records"] != self._seq:
            raise ValueError(f"{kind}: records must be {self._seq}, got {fields['records']!r}")
        return self._write_locked_and_notify(kind, fields)

    def _write_locked_and_notify(self, kind: str, fields: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            record = self._write(kind, fields)
            checkpoints = []
            if kind in SEAL_KINDS:
                self._sealed = True
                if self._signer is not None:
                    checkpoints.append((self._checkpoint(), True))
            elif self._signer is not None and self._since_checkpoint >= self._checkpoint_every:
                checkpoints.append((self._checkpoint(), False))
        self._notify(checkpoints)
        return record

    def _notify(self, checkpoints: list[tuple[dict[str, Any], bool]]) -> None:
        if self._on_checkpoint is not None:
            for record, final in checkpoints:
                self._on_checkpoint(record, final)

    def _write(self, kind: str, fields: dict[str, Any], ts: str | None = None) -> dict[str, Any]:
        """Append one record; the caller holds the lock."""
        self._check_writable(kind)
        record: dict[str, Any] = {
            "v": FORMAT_VERSION, "seq": self._seq, "ts": ts or utc_timestamp(),
            "kind": kind, "prev": self._head, **fields,
        }
        # One encoding of each half of the record, the keys sorting before `hash` and those after it,
        # gives both what the hash covers and the line (the same bytes as canonical_json(record)).
        head = canonical_json({k: v for k, v in record.items() if k < "hash"})
        tail = canonical_json({k: v for k, v in record.items() if k > "hash"})
        digest = hashlib.sha256(splice(head, tail)).hexdigest()
        record["hash"] = digest
        line = splice(head, tail, b'"hash":"' + digest.encode("ascii") + b'"')
        if len(line) + 1 >= MAX_LINE_BYTES:  # headers no server sends: refused, and readers refuse such lines
            raise ValueError(f"{kind} record of {len(line)} bytes: over {MAX_LINE_BYTES} bytes")
        try:
            _write_all(self._fd, line + b"\n")  # type: ignore[arg-type]
        except BaseException as exc:
            self._failed = exc
            raise
        if self._signer is not None:  # the tree head is only ever wanted for a signed checkpoint
            self._tree.append(leaf_hash(line))
        self._seq += 1
        self._head = record["hash"]
        self._dirty = True
        self._since_checkpoint += kind != "checkpoint"
        return record

    def _checkpoint(self) -> dict[str, Any]:
        """Append a signed checkpoint over every record so far; the caller holds the lock."""
        assert self._signer is not None
        ts, root = utc_timestamp(), self._tree.root()
        signature = self._signer.sign(checkpoint_message(self._session, self._seq, root.hex(), ts))
        text = checkpoint_text(self._session, self._seq, root)
        note = Note(text, (self._signer.sign_note(text),)).encode()
        record = self._write("checkpoint", {"records": self._seq, "head": self._head, "root": root.hex(),
                                            "key": self._signer.key, "signature": signature, "note": note}, ts)
        self._since_checkpoint = 0
        self._last_checkpoint = time.monotonic()
        return record

    def _check_writable(self, kind: str) -> None:
        if self._fd is None:
            raise ValueError("capture writer is closed")
        if self._failed is not None:
            raise CaptureError(
                f"an earlier write or fsync failed ({self._failed!r}); the log may end in a "
                "torn line and takes no more records",
                path=self.path,
            )
        if self._sealed and kind != "checkpoint":
            raise ValueError("log is sealed; it takes no more records")

    def body(self, data: bytes | None) -> dict[str, Any] | None:
        """The body object for `data`, writing a blob first if it is over the inline limit."""
        if not data:
            return None
        data = bytes(data)
        digest = hashlib.sha256(data).hexdigest()
        obj: dict[str, Any] = {"size": len(data), "sha256": digest}
        if len(data) > self.inline_limit:
            self._write_blob(digest, data)
            obj["blob"] = True
            return obj
        try:
            obj["text"] = data.decode("utf-8")
        except UnicodeDecodeError:
            obj["base64"] = base64.b64encode(data).decode("ascii")
        return obj

    def _write_blob(self, digest: str, data: bytes) -> None:
        target = self.blob_dir / digest
        if target.exists():
            return
        tmp = self.blob_dir / f".{digest}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, WRITING_MODE)
            try:
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        _fsync_dir(self.blob_dir)

    def _sync_loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            checkpoints = []
            with self._lock:
                if self._fd is None or self._failed is not None:
                    return
                due = time.monotonic() - self._last_checkpoint >= self._checkpoint_interval
                if self._signer is not None and self._since_checkpoint and not self._sealed and due:
                    try:
                        checkpoints.append((self._checkpoint(), False))
                    except (OSError, ValueError):
                        return
                if not self._dirty:
                    continue
                fd, self._dirty = self._fd, False
            # Outside the lock, so that appends go on while the disk syncs (close joins this thread
            # before it closes fd); a record appended meanwhile marks the log dirty for the next round.
            try:
                os.fsync(fd)
            except OSError as exc:
                with self._lock:
                    self._failed = exc
                return
            self._notify(checkpoints)

    def close(self) -> None:
        """Fsync and close the log (idempotent)."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
        with self._lock:
            if self._fd is None:
                return
            try:
                os.fsync(self._fd)
            finally:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> CaptureWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
