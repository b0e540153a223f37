"""What the proxy says it wrote, and whether the log on disk is that.

The proxy prints each signed checkpoint on its stdout, a pipe only the runner reads (addons/capture.py).
The runner made the session key and knows its public half, so a report that the session key did not
sign (someone else writing into the pipe) is ignored and counted. When the proxy has stopped, the log on
disk must be exactly what the proxy last reported: the sealed head, or, if the proxy died first, a log
whose record at the last reported checkpoint is that checkpoint. Anything else is tampering, and the
runner never seals such a log.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from spillage.proxy.capturelog import CHECKPOINT_PREFIX
from spillage.proxy.capturelog import SEALED_PREFIX
from spillage.proxy.capturelog import CaptureError
from spillage.proxy.capturelog import iter_records
from spillage.proxy.capturelog import record_hash
from spillage.proxy.signing import SessionKey
from spillage.proxy.signing import Signer
from spillage.proxy.signing import checkpoint_message
from spillage.proxy.signing import note_signed
from spillage.proxy.signing import signature_ok
from spillage.proxy.layout import write_checkpoint_note
from spillage.proxy.notes import Note
from spillage.proxy.notes import checkpoint_text
from spillage.proxy.notes import origin
from spillage.proxy.notes import parse_note

if TYPE_CHECKING:  # verify and the crash seal are imported by `settle`, once the proxy has stopped:
    from spillage.proxy.verify import VerifyResult   # a session's start does not wait for them


@dataclass(frozen=True)
class ReportedHead:
    """A checkpoint the proxy reported: the record itself (seq, hash) and the tree head it signs."""

    seq: int
    hash: str
    records: int
    root: str
    ts: str
    signature: str
    note: Note | None = None      # the checkpoint as a C2SP signed note, the session key's signature on it

    def as_json(self) -> dict:
        """The signed head as meta.json keeps it."""
        return {"seq": self.seq, "hash": self.hash, "tree_size": self.records, "root": self.root,
                "ts": self.ts, "signature": self.signature}


class HeadMonitor:
    """Reads the proxy's stdout lines and keeps the latest checkpoint the session key signed."""

    def __init__(self, session_key: SessionKey) -> None:
        self.session = session_key.session
        self.key = session_key.key
        self.latest: ReportedHead | None = None
        self.sealed: ReportedHead | None = None
        self.rejected = 0

    def line(self, text: str) -> None:
        """Take one line of the proxy's output (lines that are no report are ignored)."""
        for prefix, final in ((CHECKPOINT_PREFIX, False), (SEALED_PREFIX, True)):
            if text.startswith(prefix):
                head = self._checked(text[len(prefix):])
                if head is None:
                    self.rejected += 1
                    return
                self.latest = head
                if final:
                    self.sealed = head
                return

    def _checked(self, payload: str) -> ReportedHead | None:
        try:
            rec = json.loads(payload)
            if not isinstance(rec, dict) or rec.get("kind") != "checkpoint" or rec.get("key") != self.key:
                return None
            if rec.get("hash") != record_hash(rec):
                return None
            note = parse_note(rec["note"]) if "note" in rec else None
            head = ReportedHead(rec["seq"], rec["hash"], rec["records"], rec["root"], rec["ts"],
                                rec["signature"], note)
            text = checkpoint_text(self.session, head.records, bytes.fromhex(head.root))
        except (ValueError, KeyError, TypeError, RecursionError):   # NoteError is a ValueError
            return None
        message = checkpoint_message(self.session, head.records, head.root, head.ts)
        if not signature_ok(self.key, head.signature, message):
            return None
        if note is None or note.text != text or note_signed(note, origin(self.session), self.key) is not True:
            return None
        if self.latest is not None and head.seq <= self.latest.seq:
            return None
        return head


@dataclass(frozen=True)
class Settlement:
    """How the evidence ended: `sealed` (by the proxy), `sealed after crash`, `tampered` or `unsealed`,
    the verification of the log as it now is, and what the proxy last reported."""

    status: str
    result: VerifyResult
    reported: ReportedHead | None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "sealed" and self.result.ok


def record_hash_at(session_dir: Path, seq: int) -> str | None:
    """The `hash` of the record at `seq` on disk (None when there is none)."""
    try:
        for line in iter_records(session_dir):
            if line.record.get("seq") == seq:
                return line.record.get("hash")
    except CaptureError:
        return None
    return None


def settle(session_dir: Path, monitor: HeadMonitor, sealer: Signer, proxy_exit: int | None,
           pin: str, tool: str) -> Settlement:
    """Compare the stopped proxy's log with what it reported, and seal it if it crashed (`sealer` signs
    the seal); never seals a log that differs from the proxy's reports."""
    from spillage.proxy.seal import SealError
    from spillage.proxy.seal import seal_crashed
    from spillage.proxy.verify import verify

    result = verify(session_dir, pin, alone=True)
    sealed = monitor.sealed
    if sealed is not None:
        if result.ok and result.count == sealed.seq + 1 and result.head == sealed.hash:
            cosign(session_dir, sealed, sealer)   # the log is what the proxy sealed: its issuer vouches for it
            return Settlement("sealed", result, sealed)
        return Settlement("tampered", result, sealed,
                          f"the proxy sealed {sealed.seq + 1} records with head {sealed.hash}; "
                          f"on disk: {result.summary()}")
    last = monitor.latest
    if result.ok:
        return Settlement("tampered", result, last, "the log on disk is sealed, but the proxy never "
                          "reported sealing it")
    if last is not None and record_hash_at(session_dir, last.seq) != last.hash:
        return Settlement("tampered", result, last,
                          f"the proxy's last checkpoint was record {last.seq} with hash {last.hash}; "
                          "the log on disk does not hold it")
    try:
        seal_crashed(session_dir, sealer, tool,
                     f"the proxy exited ({proxy_exit}) before it sealed the log")
    except SealError as exc:
        return Settlement("unsealed", result, last, str(exc))
    return Settlement("sealed after crash", verify(session_dir, pin, alone=True), last)


def cosign(session_dir: Path, head: ReportedHead, sealer: Signer) -> None:
    """Write the final checkpoint the proxy reported as a C2SP note, cosigned by `sealer` (the issuer)."""
    note = head.note.adding(sealer.sign_note(head.note.text))
    write_checkpoint_note(session_dir, note.encode())


def describe_evidence(meta: dict, settlement) -> None:
    """Put in `meta` how the log was settled: the head the proxy sealed (a tampered log is anchored to
    what the proxy reported, so that `verify` fails on it), or what is wrong."""
    result, reported = settlement.result, settlement.reported
    meta["evidence"] = settlement.status
    if settlement.status == "sealed":
        meta["capture"] = {"records": result.count, "head": result.head,
                           "signed_head": reported.as_json() if reported else None}
    elif settlement.status == "tampered":
        meta["tampered"] = settlement.detail
        if reported is not None:
            meta["capture"] = {"records": reported.seq + 1, "head": reported.hash,
                               "signed_head": reported.as_json()}
    else:
        meta["capture_damage"] = settlement.detail or result.summary()
        if settlement.status == "sealed after crash":
            meta["capture"] = {"records": result.count, "head": result.head}
