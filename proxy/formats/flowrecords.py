"""Turn one mitmproxy HTTP exchange into capture records: what the live proxy and the importers share.

The request is handed to the shared reading as a `WireRequest` (`wire_request`); its derived `beacon`
and `form` records come from that reading (proxy/reading/records.py). `write` is an
`append(kind, **fields) -> record | None` (a CaptureWriter's, or a wrapper of it) and `body` a
`body(bytes) -> body object`; both are passed in so the live addon keeps its own error handling and
an importer can spool records before it writes them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from mitmproxy import http

from spillage.proxy.beacons import beacon_target
from spillage.proxy.beacons import endpoints
from spillage.proxy.reading.records import clean_text
from spillage.proxy.reading.records import Derived
from spillage.proxy.reading.records import write_derived
from spillage.proxy.reading.records import write_records
from spillage.proxy.reading.request import FORM_TYPES
from spillage.proxy.reading.request import Reading
from spillage.proxy.reading.request import WireRequest

Write = Callable[..., "dict | None"]
Body = Callable[[bytes | None], "dict | None"]


def header_pairs(headers: http.Headers) -> list[list[str]]:
    """Headers in wire order as [name, value] pairs, bytes decoded as Latin-1."""
    return [[k.decode("latin-1"), v.decode("latin-1")] for k, v in headers.fields]


def request_url(request: http.Request) -> str:
    """The URL a record gives for `request`: mitmproxy's pretty URL (the Host header's host), cleaned."""
    return clean_text(request.pretty_url)


def wire_request(request: http.Request, url: str | None = None) -> WireRequest:
    """`request` as the shared reading takes it (`url`: its request_url, if already made)."""
    return WireRequest(clean_text(request.method), url or request_url(request),
                       tuple((k, v) for k, v in header_pairs(request.headers)), request.raw_content)


def write_request(write: Write, body: Body, flow_id: str, request: http.Request,
                  beacon_urls: Iterable[str]) -> dict | None:
    """Write the `request` record of `request`, then its derived `beacon` and `form` records."""
    url = request_url(request)
    record = write_request_record(write, body, flow_id, request, url)
    if record is not None:
        derive(write, flow_id, record["seq"], request, url, endpoints(beacon_urls))
    return record


def derive(write: Write, flow_id: str, seq: int, request: http.Request, url: str,
           beacon_endpoints: frozenset[str], kept: tuple[WireRequest, Derived] | None = None) -> None:
    """Write the records derived from the request written as record `seq` (`url`: its request_url),
    reading it only when it can derive one: an event endpoint's, or a body sent as a form. `kept` is
    what a reading made before derived (the guard's) and of which request: used when it is this one."""
    if kept is not None and kept[0] == wire_request(request, url):
        write_records(write, flow_id, seq, kept[1])
        return
    form = request.raw_content and request.headers.get("content-type", "").lstrip().lower().startswith(FORM_TYPES)
    if form or beacon_target(url) in beacon_endpoints:
        write_derived(write, flow_id, seq, Reading(wire_request(request, url)), url, beacon_endpoints)


def write_request_record(write: Write, body: Body, flow_id: str, request: http.Request, url: str) -> dict | None:
    """Write the `request` record of `request` alone (`url`: its request_url)."""
    return write(
        "request", flow=flow_id, method=clean_text(request.method), url=url,
        http_version=clean_text(request.http_version), headers=header_pairs(request.headers),
        body=body(request.raw_content),
    )


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
                  refusal: dict, content: bytes | None = None) -> dict | None:
    """Write the `egress_blocked` record of a refused request or tunnel, keeping all the client sent
    (`content`: the body as the client sent it, for a request whose body was never read; else its own)."""
    return write(
        "egress_blocked", flow=flow_id, method=clean_text(request.method), url=clean_text(url),
        host=clean_text(request.pretty_host), port=request.port, background=refusal["background"],
        headers=header_pairs(request.headers), body=body(request.raw_content if content is None else content),
        reason=refusal["reason"],
    )
