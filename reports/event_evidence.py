"""What proves one leak event on the forensic page: the record that carried the matched text, the
forms that text takes on the wire, and the piece of the request the auditor decoded it from."""

from dataclasses import dataclass
from urllib.parse import quote
from urllib.parse import quote_plus

from spillage.proxy.capturelog import CaptureError
from spillage.proxy.reading.request import Piece
from spillage.proxy.reading.request import Reading
from spillage.proxy.reading.request import WireRequest
from spillage.reports.timeline import Timeline
from spillage.reports.timeline import record_blocks

WIRE_KINDS = ("request", "egress_blocked")


@dataclass(frozen=True)
class EventEvidence:
    """The record that proves an event (`seq`), the texts to highlight in it (`forms`), the decoded
    piece of the request that held the match (None when the reading has none), the other records of
    its evidence that carry it, and whether the proving record carries it at all."""

    seq: int
    forms: list[str]
    piece: Piece | None
    carriers: list[int]
    found: bool


def matched_forms(matched: str) -> list[str]:
    """The matched text (a cue without its `cue:` prefix) and its percent-encoded forms."""
    text = matched.removeprefix("cue:")
    return list(dict.fromkeys(f for f in (text, quote_plus(text), quote(text, safe="")) if f))


def carries(timeline: Timeline, record: dict, forms: list[str]) -> bool:
    """Whether any of `forms` occurs, in any case, in the record as the page shows it."""
    shown = "\n".join(record_blocks(timeline.folder, record, forms)).lower()
    return any(form.lower() in shown for form in forms)


def event_evidence(timeline: Timeline, event: dict) -> EventEvidence:
    """The place the audit named (lexical judge), else the event's own record when it carries the
    match, else the first record of its evidence that does."""
    forms = matched_forms(event["matched"])
    records = timeline.exchange(event["evidence"])
    holding = [r["seq"] for r in records if carries(timeline, r, forms)]
    place = event.get("place") or {}
    if "seq" in place:
        seq = place["seq"]
    elif event["seq"] in holding or not holding:
        seq = event["seq"]
    else:
        seq = holding[0]
    return EventEvidence(seq, forms, decoded_piece(timeline, seq, forms, place), [s for s in holding if s != seq],
                         seq in holding)


def decoded_piece(timeline: Timeline, seq: int, forms: list[str], place: dict) -> Piece | None:
    """The piece of record `seq`'s request (a beacon's: the request it was read from) that the audit
    named, or the first whose decoded text holds the match."""
    record = timeline.records.get(seq) or {}
    if record.get("kind") not in WIRE_KINDS:
        record = timeline.records.get(record.get("request")) or {}
    if record.get("kind") not in WIRE_KINDS:
        return None
    try:
        pieces = Reading(WireRequest.of_record(record, timeline.folder)).pieces
    except CaptureError:
        return None
    named = [p for p in pieces if (p.where, p.raw[:500]) == (place.get("where"), place.get("raw"))]
    return next(iter(named), None) or next((p for p in pieces if forms[0].lower() in p.text.lower()), None)
