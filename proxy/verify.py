"""`spillage verify`: check a capture log's chain, sequence, bodies, blobs and seal.

Streams the log and stops at the first problem, classified as in docs/CAPTURE_FORMAT.md.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from spillage.proxy.capturelog import (
    BLOB_DIR,
    GENESIS,
    LOG_NAME,
    CaptureError,
    TornLineError,
    capture_path,
    is_sha256,
    iter_records,
    read_body,
    record_hash,
)

DAMAGE = (
    "modified", "missing", "inserted", "reordered", "truncated", "torn last line",
    "blob missing", "blob altered",
)
META_NAME = "meta.json"


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

    def summary(self) -> str:
        """The one line `spillage verify` prints."""
        if self.ok:
            return f"OK {self.count} records, head {self.head}" + provenance_note(self.provenance)
        where = f"{self.path}:{self.line}" if self.line is not None else str(self.path)
        seq = f" seq {self.seq}:" if self.seq is not None else ""
        return f"FAIL {where}:{seq} {self.damage}: {self.message}"


PROVENANCE_FIELDS = ("format", "file", "size", "sha256")


def provenance_note(provenance: dict | None) -> str:
    """What the chain of an imported log vouches for ('' for a log the proxy wrote)."""
    if not provenance:
        return ""
    return (f"; imported from {provenance['file']} ({provenance['format']}, sha256 {provenance['sha256']}): "
            "the chain vouches for the import, not for the original capture")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def verify(path: str | os.PathLike[str]) -> VerifyResult:
    """Verify the log of a session folder (or a capture.jsonl) and, if present, its meta.json."""
    log = capture_path(path)
    session = log.parent
    count, head, lineno = 0, GENESIS, 0
    sealed_at: int | None = None
    provenance: dict | None = None

    def fail(damage: str, message: str, line: int | None, seq: int | None) -> VerifyResult:
        return VerifyResult(
            ok=False, count=count, head=head, path=log,
            damage=damage, line=line, seq=seq, message=message,
        )

    try:
        for item in iter_records(log):
            rec, lineno = item.record, item.lineno
            seq = rec.get("seq")
            at = seq if _is_int(seq) else count
            if sealed_at is not None:
                return fail("inserted", f"record after session_end (line {sealed_at})", lineno, at)
            if rec.get("hash") != record_hash(rec):
                return fail("modified", "hash does not match the record's content", lineno, at)
            if not _is_int(seq):
                return fail("modified", f"seq is not an integer: {seq!r}", lineno, at)
            if seq < count:
                message = f"seq {seq} was already used; expected {count}"
                return fail("inserted", message, lineno, seq)
            if seq > count:
                if _seq_appears_after(log, lineno, count):
                    return fail(
                        "reordered",
                        f"expected seq {count}, found {seq}; seq {count} comes later in the file",
                        lineno, seq,
                    )
                return fail(
                    "missing", f"expected seq {count}, found {seq}; seq {count} is nowhere in "
                    "the log", lineno, seq,
                )
            if rec.get("prev") != head:
                return fail(
                    "inserted",
                    "prev does not match the hash of the record before it"
                    + (f" (line {lineno - 1})" if lineno > 1 else " (genesis)"),
                    lineno, seq,
                )
            problem = _check_body(session, rec.get("body"))
            if problem:
                return fail(*problem, lineno, seq)
            count, head = count + 1, rec["hash"]
            if rec.get("kind") == "import" and seq == 1:  # an imported log starts so
                provenance = {key: rec.get(key) for key in PROVENANCE_FIELDS} | {"seq": seq}
            if rec.get("kind") == "session_end":
                sealed_at = lineno
    except TornLineError as exc:
        return fail("torn last line", exc.message, exc.line, count)
    except CaptureError as exc:
        return fail("modified", exc.message, exc.line, count)

    if sealed_at is None:
        return fail(
            "truncated", f"log ends after {count} records without session_end", lineno + 1, count
        )
    problem = _check_meta(session / META_NAME, count, head)
    if problem:
        damage, message, n = problem
        return fail(damage, message, n + 1, n)
    return VerifyResult(ok=True, count=count, head=head, path=log, provenance=provenance)


def _seq_appears_after(log: Path, after_line: int, seq: int) -> bool:
    """True if a record with `seq` is on a line after `after_line` (second, tolerant pass)."""
    with open(log, "rb") as f:
        for raw in itertools.islice(f, after_line, None):
            try:
                rec = json.loads(raw)
            except ValueError:
                continue
            if isinstance(rec, dict) and _is_int(rec.get("seq")) and rec["seq"] == seq:
                return True
    return False


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
    blob = session / BLOB_DIR / digest
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


def _check_meta(meta_path: Path, count: int, head: str) -> tuple[str, str, int] | None:
    """(damage, message, index of the record at issue) if meta.json disagrees with the log."""
    try:
        meta = json.loads(meta_path.read_text("utf-8"))
    except FileNotFoundError:
        return None
    except ValueError as exc:
        return "modified", f"{META_NAME} is not valid JSON: {exc}", count - 1
    sealed = meta.get("capture") if isinstance(meta, dict) else None
    if sealed is None:
        return None
    records = sealed.get("records") if isinstance(sealed, dict) else None
    if not _is_int(records) or not is_sha256(sealed.get("head")):
        return "modified", f"{META_NAME}: capture must be {{records: int, head: sha256}}", count - 1
    if records > count:
        return "truncated", f"{META_NAME} sealed {records} records, the log has {count}", count
    if records < count:
        return "inserted", f"{META_NAME} sealed {records} records, the log has {count}", records
    if sealed["head"] != head:
        message = f"{META_NAME} sealed head {sealed['head']}, the log's is {head}"
        return "modified", message, count - 1
    return None


def run_verify(
    path: str | os.PathLike[str], out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Print the verdict on `out` and return 0 (OK) or 1 (damage); 2 for unusable input."""
    out = out or sys.stdout
    err = err or sys.stderr
    given = Path(path)
    log = capture_path(given)
    if not given.exists():
        print(f"error: {given}: no such file or folder", file=err)
        return 2
    if not log.is_file():
        print(f"error: {given}: no {LOG_NAME} in this folder", file=err)
        return 2
    try:
        result = verify(log)
    except OSError as exc:
        print(f"error: {log}: cannot read: {exc.strerror or exc}", file=err)
        return 2
    print(result.summary(), file=out)
    return 0 if result.ok else 1
