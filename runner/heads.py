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
from spillage.proxy.signing import signature_ok

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
            head = ReportedHead(rec["seq"], rec["hash"], rec["records"], rec["root"], rec["ts"],
                                rec["signature"])
        except (ValueError, KeyError, TypeError, RecursionError):
            return None
        message = checkpoint_message(self.session, head.records, head.root, head.ts)
        if not signature_ok(self.key, head.signature, message):
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

    result = verify(session_dir, pin)
    sealed = monitor.sealed
    if sealed is not None:
        if result.ok and result.count == sealed.seq + 1 and result.head == sealed.hash:
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
    return Settlement("sealed after crash", verify(session_dir, pin), last)


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
