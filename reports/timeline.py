"""What `spillage inspect` shows of one session: its chain verification, its audit (audit.json, or an
audit made now when there is none or it is stale), and the raw records its actions and events rest on."""

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from spillage.audit.open_session import OpenSession
from spillage.audit.open_session import open_session
from spillage.audit.session_audit import AuditError
from spillage.audit.session_audit import audit_opened
from spillage.proxy.capturelog import CaptureError
from spillage.proxy.documents import load_json
from spillage.proxy.layout import BLOB_DIR
from spillage.proxy.layout import LOG_NAME
from spillage.proxy.layout import MAX_AUDIT_BYTES
from spillage.proxy.layout import REPORT_NAME
from spillage.proxy.verify import VerifyResult

BODY_CHARS = 4000  # of a body shown in full before it is cut


class InspectError(RuntimeError):
    """The session cannot be inspected (no capture log, no audit possible); one line for the user."""


@dataclass
class Timeline:
    """One session, ready to show: the opened session (its verification), its audit, and the records
    named by its evidence."""

    session: OpenSession
    audit: dict
    audit_source: str
    records: dict[int, dict]  # seq → record, for every record an action or event rests on
    responses: dict[int, int]  # request seq → its response's seq
    started: datetime | None

    @property
    def folder(self) -> Path:
        return self.session.folder

    @property
    def check(self) -> VerifyResult:
        return self.session.check

    def seconds(self, seq: int) -> float | None:
        """Seconds from the session's start to record `seq`."""
        record = self.records.get(seq)
        if record is None or self.started is None:
            return None
        return (timestamp(record["ts"]) - self.started).total_seconds()

    def events_of(self, action: int) -> list[dict]:
        return [e for e in self.audit["events"] if e["action"] == action]

    def exchange(self, seqs: list[int]) -> list[dict]:
        """The records behind `seqs` in log order: each one, the request a derived record or response
        names, and each request's response."""
        wanted = set()
        for seq in seqs:
            record = self.records.get(seq)
            if record is None:
                continue
            wanted.add(seq)
            request = record.get("request")
            if isinstance(request, int):
                wanted.add(request)
        wanted |= {self.responses[s] for s in list(wanted) if s in self.responses}
        return [self.records[s] for s in sorted(wanted) if s in self.records]


def chain_status(check: VerifyResult) -> tuple[bool, str]:
    """(whether the chain verifies, verify's line without its OK or FAIL: said once, by the label)."""
    return check.ok, check.summary().removeprefix("OK ").removeprefix("FAIL ")


def timestamp(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


def load_timeline(folder: Path, home: Path | None = None) -> Timeline:
    """Open `folder` (its log verified and read once), take its audit (made now, with the catalog store
    of the spillage `home`, when it has none), and keep the records the audit's evidence names."""
    folder = Path(folder)
    if folder.name == LOG_NAME and folder.is_file():
        folder = folder.parent
    if folder.is_file():
        raise InspectError(f"{folder}: a file, not a session folder (one holds {LOG_NAME})")
    if not (folder / LOG_NAME).is_file():
        raise InspectError(f"{folder}: no {LOG_NAME} here; is this a session folder?")
    session = open_session(folder, home=home, keep_lines=True)
    audit, source = session_audit(session)
    seqs = {s for a in audit["actions"] for s in a["evidence"]} | {s for e in audit["events"] for s in e["evidence"]}
    index = read_index(session)
    requests = {seq for seq in seqs if index.get(seq, (None,))[0] in ("request", "egress_blocked")}
    requests |= {index[seq][1] for seq in seqs if seq in index and index[seq][1] is not None}
    responses = {request: seq for seq, (kind, request) in index.items() if kind == "response" and request in requests}
    keep = seqs | requests | set(responses.values()) | {0}
    records = {line.record["seq"]: line.record for line in safe_records(session) if line.record.get("seq") in keep}
    start = records.get(0)
    return Timeline(session, audit, source, records, responses, timestamp(start["ts"]) if start else None)


def session_audit(session: OpenSession) -> tuple[dict, str]:
    """The session's audit.json when it audits this very log; otherwise an audit made now (of the
    records before the damage, for a log that fails verification)."""
    path, check = session.folder / REPORT_NAME, session.check
    if path.is_file():
        try:
            audit = load_json(path, MAX_AUDIT_BYTES, REPORT_NAME)
            if audit["capture"]["head"] == check.head and audit["capture"]["verified"] == check.ok:
                return audit, REPORT_NAME
            reason = f"{REPORT_NAME} is stale (another head), audited now"
        except (OSError, ValueError, KeyError, TypeError):
            reason = f"{REPORT_NAME} is unreadable, audited now"
    else:
        reason = f"no {REPORT_NAME}, audited now"
    try:
        return audit_opened(session, allow_unverified=True), reason
    except AuditError as e:
        raise InspectError(str(e)) from e


def read_index(session: OpenSession) -> dict[int, tuple[str, int | None]]:
    """seq → (kind, the request seq the record names: responses, beacons, forms, errors; else None)."""
    index = {}
    for line in safe_records(session):
        record = line.record
        if isinstance(record.get("seq"), int):
            request = record.get("request")
            index[record["seq"]] = (record.get("kind"), request if isinstance(request, int) else None)
    return index


def safe_records(session: OpenSession):
    """The log's records up to the first line that is not a record (verification reports that)."""
    try:
        yield from session.lines()
    except CaptureError:
        return


SHOWN_FIELDS = ("kind", "seq", "ts", "prev", "hash", "v", "headers", "body", "method", "url", "status", "reason")


def record_blocks(folder: Path, record: dict, around: list[str] = ()) -> list[str]:
    """What a page shows of one raw record: its line, its headers, its body (a window around `around`
    when long) and its other fields as JSON; the empty ones left out."""
    line = " ".join(str(record[k]) for k in ("method", "url", "status", "reason") if record.get(k) not in (None, ""))
    headers = "\n".join(f"{name}: {value}" for name, value in record.get("headers") or [])
    rest = {k: v for k, v in record.items() if k not in SHOWN_FIELDS}
    body = body_text(folder, record["body"], around) if "body" in record else ""
    return [block for block in (line, headers, body, json.dumps(rest, indent=1, ensure_ascii=False) if rest else "")
            if block]


def body_text(folder: Path, body: dict | None, around: list[str] = ()) -> str:
    """A body as text to show: inline or blob text (BODY_CHARS of it when longer, around the first of
    `around` found), or what it is when binary."""
    if body is None:
        return "(no body)"
    size = body.get("size", 0)
    if "text" in body:
        text = body["text"]
    elif body.get("blob"):
        path = folder / BLOB_DIR / str(body.get("sha256"))
        try:
            text = path.read_bytes().decode("utf-8")
        except FileNotFoundError:
            return f"({size:,} bytes in {BLOB_DIR}/{body.get('sha256')}, missing)"
        except UnicodeDecodeError:
            return f"({size:,} bytes of binary data in {BLOB_DIR}/{body.get('sha256')})"
    else:
        return f"({size:,} bytes of binary data, base64 in the log)"
    if len(text) > BODY_CHARS:
        return f"{excerpt(text, list(around), BODY_CHARS)}\n({len(text):,} characters, {size:,} bytes)"
    return text


def match_spans(text: str, matches: list[str]) -> list[tuple[str, bool]]:
    """`text` cut into (piece, is a match) around every case-insensitive occurrence of `matches`."""
    pattern = "|".join(re.escape(m) for m in sorted(set(matches), key=len, reverse=True) if m)
    if not pattern:
        return [(text, False)]
    spans, at = [], 0
    for found in re.finditer(pattern, text, re.I):
        spans += [(text[at:found.start()], False), (found.group(0), True)]
        at = found.end()
    return [(piece, hit) for piece, hit in spans + [(text[at:], False)] if piece]


def excerpt(text: str, matches: list[str], width: int) -> str:
    """At most `width` characters of `text`: a window around the first match when it lies beyond."""
    if len(text) <= width:
        return text
    found = [m.start() for m in (re.search(re.escape(x), text, re.I) for x in matches if x) if m]
    start = min(max(0, min(found, default=0) - width // 3), len(text) - width)
    return ("…" if start else "") + text[start:start + width] + ("…" if start + width < len(text) else "")


def sent_strings(action: dict) -> list[tuple[str, str]]:
    """(label, string) pairs of what an action sent: its text, clicked labels, decoded request text."""
    shown, pairs = set(), []
    for label, values in (("text", [action["text"]]), ("clicked", action.get("clicked", [])),
                          ("sent", action.get("sent", []))):
        for value in values:
            if value and value not in shown:
                shown.add(value)
                pairs.append((label, value))
    return pairs
