"""Turn one HTTP exchange into capture records: the derivation the live proxy and the importers share.

`write` is an `append(kind, **fields) -> record | None` (a CaptureWriter's, or a wrapper of it) and
`body` a `body(bytes) -> body object`; both are passed in so the live addon keeps its own error
handling and an importer can spool records before it writes them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

from mitmproxy import http
from mitmproxy.net.http import multipart

from spillage.proxy.beacons import beacon_target
from spillage.proxy.beacons import endpoints

FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
BEACON_EVENT_FIELDS = ("t", "type", "event")

Write = Callable[..., "dict | None"]
Body = Callable[[bytes | None], "dict | None"]


def clean_text(text: str) -> str:
    """`text` as a log record can hold it: bytes that were not UTF-8 (mitmproxy decodes them to
    surrogate escapes) become `%XX`, and a lone surrogate (JSON's "\\ud800") becomes U+FFFD. The
    request record's raw body keeps the exact bytes."""
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


def header_pairs(headers: http.Headers) -> list[list[str]]:
    """Headers in wire order as [name, value] pairs, bytes decoded as Latin-1."""
    return [[k.decode("latin-1"), v.decode("latin-1")] for k, v in headers.fields]


def beacon_payload(body: bytes) -> tuple[str, object]:
    """The beacon's event name and parsed JSON payload (`unknown`, None when not JSON)."""

    def reject(constant: str):
        raise ValueError(f"non-finite number {constant}")

    try:
        data = json.loads(body.decode("utf-8"), parse_constant=reject)
        text = json.dumps(data, ensure_ascii=False)
        cleaned = clean_text(text)
        if cleaned is not text:  # a lone surrogate in a string: keep the rest readable
            data = json.loads(cleaned)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return "unknown", None
    if isinstance(data, dict):
        for field in BEACON_EVENT_FIELDS:
            if isinstance(data.get(field), str):
                return data[field], data
    return "unknown", data


def form_fields(request: http.Request) -> tuple[str, list[list[str]]] | None:
    """(enctype, [[name, value], ...]) when the request body is a submitted form, else None."""
    if not request.raw_content:
        return None
    content_type = single_content_type(request)
    media_type = content_type.split(";")[0].strip().lower()
    if media_type not in FORM_TYPES:
        return None
    if media_type == "multipart/form-data":
        try:
            items = multipart.decode_multipart(content_type, request.get_content(strict=False) or b"")
        except ValueError:
            items = []
        fields = [[k.decode("utf-8", "replace"), v.decode("utf-8", "replace")] for k, v in items]
    else:
        fields = [[clean_text(k), clean_text(v)] for k, v in request.urlencoded_form.items(multi=True)]
    return media_type, fields


def single_content_type(request: http.Request) -> str:
    """The request's Content-Type, sent once or repeated with the same value (as chrome-har's HARs
    repeat it); "" when absent or when repeated values disagree, as then no one can tell the body's type."""
    values = {v.strip() for v in request.headers.get_all("content-type")}
    return values.pop() if len(values) == 1 else ""


def request_url(request: http.Request) -> str:
    """The URL a record gives for `request`: mitmproxy's pretty URL (the Host header's host), cleaned."""
    return clean_text(request.pretty_url)


def is_beacon(request: http.Request, beacon_urls: Iterable[str]) -> bool:
    """True when `request` goes to one of the event endpoints `beacon_urls` (host/path; proxy/beacons.py)."""
    return beacon_target(request_url(request)) in endpoints(beacon_urls)


def write_request(write: Write, body: Body, flow_id: str, request: http.Request,
                  beacon_urls: Iterable[str]) -> dict | None:
    """Write the `request` record of `request`, then its derived `beacon` and `form` records."""
    url = request_url(request)
    record = write_request_record(write, body, flow_id, request, url)
    if record is not None:
        write_derived(write, flow_id, record["seq"], request, url, endpoints(beacon_urls))
    return record


def write_request_record(write: Write, body: Body, flow_id: str, request: http.Request, url: str) -> dict | None:
    """Write the `request` record of `request` alone (`url`: its request_url)."""
    return write(
        "request", flow=flow_id, method=clean_text(request.method), url=url,
        http_version=clean_text(request.http_version), headers=header_pairs(request.headers),
        body=body(request.raw_content),
    )


def write_derived(write: Write, flow_id: str, seq: int, request: http.Request, url: str,
                  beacon_endpoints: frozenset[str]) -> None:
    """Write the `beacon` and `form` records derived from the request written as record `seq` (`url`: its
    request_url; `beacon_endpoints`: proxy/beacons.py's endpoints)."""
    if beacon_target(url) in beacon_endpoints:
        event, data = beacon_payload(request.raw_content or b"")
        write("beacon", flow=flow_id, request=seq, url=url, event=clean_text(event), data=data)
    form = form_fields(request)
    if form:
        enctype, fields = form
        write("form", flow=flow_id, request=seq, url=url,
              method=clean_text(request.method), enctype=enctype, fields=fields)


def write_response(write: Write, body: Body, flow_id: str, request_seq: int,
                   response: http.Response) -> dict | None:
    """Write the `response` record answering the request record `request_seq`."""
    return write(
        "response", flow=flow_id, request=request_seq,
        status=response.status_code, reason=response.reason,
        http_version=response.http_version, headers=header_pairs(response.headers),
        body=body(response.raw_content),
    )


def write_refusal(write: Write, body: Body, flow_id: str, request: http.Request, url: str,
                  refusal: dict) -> dict | None:
    """Write the `egress_blocked` record of a refused request or tunnel, keeping all the client sent."""
    return write(
        "egress_blocked", flow=flow_id, method=clean_text(request.method), url=clean_text(url),
        host=clean_text(request.pretty_host), port=request.port, background=refusal["background"],
        headers=header_pairs(request.headers), body=body(request.raw_content),
        reason=refusal["reason"],
    )
