"""`spillage export`: a session's exchanges, rebuilt from its records, written as HAR, mitmproxy
flows or pcap. The output file appears whole, or not at all.

Derived records (beacon, form) and session markers are not exported: an import derives them again.
A refused request is exported as the 403 the proxy answered it with, which is how imports recognise it.
With `redact_cookies` the values of credentials in headers (Cookie, Set-Cookie, Authorization and
their kin) are replaced by REDACTED, their names kept: a file to share from a live session.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from mitmproxy import http

from spillage.proxy.documents import atomic_file
from spillage.proxy.refusal import REFUSED_BODY
from spillage.proxy.capturelog import iter_records
from spillage.proxy.capturelog import read_body
from spillage.proxy.formats.exchange import REQUEST
from spillage.proxy.formats.exchange import RESPONSE
from spillage.proxy.formats.exchange import UNKNOWN_BODY
from spillage.proxy.formats.exchange import Exchange
from spillage.proxy.formats.exchange import latin1_pairs
from spillage.proxy.formats.exchange import make_request
from spillage.proxy.formats.exchange import make_response

REFUSAL_HEADERS = [("Content-Type", "text/plain; charset=utf-8")]
CREDENTIAL_HEADERS = {"cookie", "set-cookie", "set-cookie2", "authorization", "proxy-authorization",
                      "x-csrf-token", "x-xsrf-token", "x-api-key", "x-amz-security-token"}
REDACTED = "REDACTED"
UNKNOWN = {UNKNOWN_BODY.format(which): which for which in (REQUEST, RESPONSE)}


def epoch(ts: str) -> float:
    """Epoch seconds of a record's `ts`."""
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def session_exchanges(session_dir: Path) -> Iterator[Exchange]:
    """The session's exchanges in the order their requests were made, streamed from its log.

    An exchange is yielded once it is answered and a record about something else follows (notes on
    it come right after its answer), so memory holds only exchanges still waiting for their answer."""
    pending: dict[int, Exchange] = {}    # request seq → exchange, in request order
    answered: set[int] = set()
    for line in iter_records(session_dir):
        r = line.record
        kind = r["kind"]
        if kind == "request":
            request = make_request(r["method"], r["url"], r["http_version"], latin1_pairs(r["headers"]),
                                   read_body(session_dir, r["body"]), epoch(r["ts"]))
            pending[r["seq"]] = Exchange(r["flow"], request)
        elif kind == "egress_blocked":
            request = make_request(r["method"], r["url"], "HTTP/1.1", latin1_pairs(r["headers"]),
                                   read_body(session_dir, r["body"]), epoch(r["ts"]))
            pending[r["seq"]] = Exchange(r["flow"], request, refusal_response(epoch(r["ts"])))
            answered.add(r["seq"])
        elif kind == "response" and r["request"] in pending:
            pending[r["request"]].response = make_response(
                r["status"], r["reason"], r["http_version"], latin1_pairs(r["headers"]),
                read_body(session_dir, r["body"]), epoch(r["ts"]))
            answered.add(r["request"])
        elif kind == "error" and r["request"] in pending:
            x = pending[r["request"]]
            if r["message"] in UNKNOWN:
                x.unknown_bodies += (UNKNOWN[r["message"]],)
            else:
                x.error = r["message"]
                answered.add(r["request"])
        about = r.get("request") if kind in ("response", "error", "beacon", "form") else r.get("seq")
        while pending and next(iter(pending)) in answered and next(iter(pending)) != about:
            seq = next(iter(pending))
            answered.discard(seq)
            yield pending.pop(seq)
    yield from pending.values()


def redacted_value(name: str, value: str) -> str:
    """`value` of header `name` with its credentials replaced: cookies keep their names (and a
    Set-Cookie its attributes), an Authorization its scheme."""
    name = name.lower()
    if name == "cookie":
        return "; ".join(f"{c.split('=', 1)[0].strip()}={REDACTED}" for c in value.split(";") if c.strip())
    if name.startswith("set-cookie"):
        first, sep, attributes = value.partition(";")
        return f"{first.split('=', 1)[0].strip()}={REDACTED}{sep}{attributes}"
    if name.endswith("authorization") and " " in value.strip():
        return f"{value.strip().split(' ', 1)[0]} {REDACTED}"
    return REDACTED


def redact(message: http.Message) -> None:
    for name in {k for k in message.headers if k.lower() in CREDENTIAL_HEADERS}:
        message.headers.set_all(name, [redacted_value(name, v) for v in message.headers.get_all(name)])


def redact_cookies(exchanges: Iterator[Exchange]) -> Iterator[Exchange]:
    for x in exchanges:
        redact(x.request)
        if x.response is not None:
            redact(x.response)
        yield x


def export_session(session_dir: Path, fmt: str, out: Path, redact: bool = False) -> int:
    """Write the session as `fmt` to `out` atomically (a temporary file next to it, renamed), with
    credentials redacted when `redact`; the number of exchanges written."""
    exchanges = session_exchanges(Path(session_dir))
    if redact:
        exchanges = redact_cookies(exchanges)
    if fmt == "har":
        from spillage.proxy.formats.har import write_har
        with atomic_file(out, "w") as f:
            return write_har(exchanges, f)
    if fmt == "mitm":
        from spillage.proxy.formats.mitmflows import write_flows
        with atomic_file(out, "wb") as f:
            return write_flows(exchanges, f)
    from spillage.proxy.formats.pcap import write_pcap
    with atomic_file(out, "wb") as f:
        return write_pcap(exchanges, f)


def refusal_response(ts: float) -> http.Response:
    """The 403 our proxy answers a refused request with."""
    return make_response(403, "Forbidden", "HTTP/1.1", latin1_pairs(REFUSAL_HEADERS), REFUSED_BODY, ts)
