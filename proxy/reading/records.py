"""The records a request derives in the capture log besides its own (`beacon`, `form`), made from
its reading: the live proxy, the importers, the guard and the audit's replay of what was attempted
all derive them here, so they agree on every request.

`write` is an `append(kind, **fields) -> record | None` (a CaptureWriter's, or a wrapper of it).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from spillage.proxy.beacons import beacon_target
from spillage.proxy.reading.request import Reading

Write = Callable[..., "dict | None"]


def clean_text(text: str) -> str:
    """`text` as a log record can hold it: bytes that were not UTF-8 (decoded to surrogate escapes)
    become `%XX`, and a lone surrogate (JSON's "\\ud800") becomes U+FFFD. The request record's raw
    body keeps the exact bytes."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join(_clean_char(c) for c in text)
    return text


def _clean_char(c: str) -> str:
    code = ord(c)
    if 0xDC80 <= code <= 0xDCFF:
        return f"%{code - 0xDC00:02X}"
    return "\ufffd" if 0xD800 <= code <= 0xDFFF else c


def beacon_payload(reading: Reading) -> tuple[str, object]:
    """An event endpoint's event name and JSON payload, as a record can hold them (`unknown`, None
    when the body is not JSON)."""
    event, data = reading.beacon()
    if data is None:
        return event, None
    text = json.dumps(data, ensure_ascii=False)
    cleaned = clean_text(text)
    if cleaned is not text:  # a lone surrogate in a string: keep the rest readable
        data = json.loads(cleaned)
    return clean_text(event), data


def form_fields(reading: Reading) -> tuple[str, list[list[str]]] | None:
    """(enctype, [[name, value], ...]) when the body is a submitted form, else None."""
    form = reading.form
    if form is None:
        return None
    return reading.media[0], [[clean_text(k), clean_text(v)] for k, v in form]


Derived = list[tuple[str, dict]]   # (kind, fields) of the records a request derives, naming no flow or request


def derived_records(reading: Reading, url: str, beacon_endpoints: frozenset[str]) -> Derived:
    """The `beacon` and `form` records a request derives (`url`: its recorded URL; `beacon_endpoints`:
    proxy/beacons.py's endpoints), each as (kind, fields) without the flow and the request it names."""
    derived = []
    if beacon_target(url) in beacon_endpoints:
        event, data = beacon_payload(reading)
        derived.append(("beacon", {"url": url, "event": event, "data": data}))
    form = form_fields(reading)
    if form:
        enctype, fields = form
        derived.append(("form", {"url": url, "method": clean_text(reading.request.method), "enctype": enctype,
                                 "fields": fields}))
    return derived


def write_records(write: Write, flow_id: str, seq: int, derived: Derived) -> None:
    """Write `derived` records as those of flow `flow_id`'s request written as record `seq`."""
    for kind, fields in derived:
        write(kind, flow=flow_id, request=seq, **fields)


def write_derived(write: Write, flow_id: str, seq: int, reading: Reading, url: str,
                  beacon_endpoints: frozenset[str]) -> None:
    """Write the `beacon` and `form` records derived from the request written as record `seq` (`url`:
    its recorded URL; `beacon_endpoints`: proxy/beacons.py's endpoints)."""
    write_records(write, flow_id, seq, derived_records(reading, url, beacon_endpoints))
