"""HAR 1.2 (http://www.softwareishard.com/blog/har-12-spec/) in and out.

Reads what Chrome DevTools, Playwright's `record_har` and browser-use's `record_har_path` write:
`postData.text` or only `postData.params`, base64 `content.encoding`, bodies kept in sidecar files
(`_file`, browser-use's attach mode), omitted bodies (unknown, not empty), HTTP/2 pseudo-headers
(dropped: the proxy never sees them either), entries served from the browser's cache (skipped: they
never crossed the wire). A HAR is one JSON document, so it is read whole.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import parse_qsl, urlencode, urlsplit

from mitmproxy.net import encoding

from spillage.proxy.formats.exchange import REQUEST
from spillage.proxy.formats.exchange import RESPONSE
from spillage.proxy.formats.exchange import Exchange
from spillage.proxy.formats.exchange import FormatError
from spillage.proxy.formats.exchange import latin1_pairs
from spillage.proxy.formats.exchange import make_request
from spillage.proxy.formats.exchange import make_response
from spillage.proxy.version import SPILLAGE_VERSION

NO_BODY_METHODS = ("GET", "HEAD", "OPTIONS", "CONNECT")
FLOW_FIELD = "_flowId"   # our custom field: the flow id of the record the entry came from


def read_har(path: Path) -> Iterator[Exchange]:
    """The exchanges of a HAR file, in file order; FormatError names the entry and field at fault."""
    try:
        with open(path, "rb") as f:
            har = json.loads(f.read().decode("utf-8-sig"))
    except UnicodeDecodeError as e:
        raise FormatError(f"byte {e.start}", "UTF-8 text (a HAR file is JSON)") from None
    except json.JSONDecodeError as e:
        raise FormatError(f"line {e.lineno} column {e.colno}", f"valid JSON ({e.msg})") from None
    entries = field(har, "log", dict, "")
    entries = field(entries, "entries", list, "log")
    sidecar = path.parent / f"{path.stem}_har_parts"
    for n, entry in enumerate(entries):
        where = f"log.entries[{n}]"
        if not isinstance(entry, dict):
            raise FormatError(where, "an object")
        item = entry_exchange(entry, where, n, sidecar)
        if item is not None:
            yield item


KIND_NAMES = {dict: "an object", list: "an array", str: "a string", int: "a number"}


def field(obj: Any, name: str, kind: type, where: str) -> Any:
    """obj[name], which must be of `kind`; FormatError naming `where.name` otherwise."""
    value = obj.get(name) if isinstance(obj, dict) else None
    if not isinstance(value, kind) or isinstance(value, bool):
        raise FormatError(f"{where}.{name}" if where else name, KIND_NAMES[kind])
    return value


def entry_exchange(entry: dict, where: str, n: int, sidecar: Path) -> Exchange | None:
    """One entry as an Exchange; None for what never crossed the wire (cache hits, data: URLs)."""
    req = field(entry, "request", dict, where)
    res = field(entry, "response", dict, where)
    method = field(req, "method", str, f"{where}.request")
    url = field(req, "url", str, f"{where}.request")
    if entry.get("_fromCache") in ("memory", "disk") or urlsplit(url).scheme not in ("http", "https", ""):
        return None
    started = timestamp(entry.get("startedDateTime"), f"{where}.startedDateTime")
    headers = har_headers(req, f"{where}.request")
    body, unknown = request_body(req, method, f"{where}.request", sidecar)
    if method.upper() == "CONNECT" and "://" in url:
        url = urlsplit(url).netloc
    try:
        request = make_request(method, url, http_version(req), headers, body, started)
    except FormatError as e:
        raise FormatError(f"{where}.request.url", e.expected) from None
    flow = entry.get(FLOW_FIELD) if isinstance(entry.get(FLOW_FIELD), str) else f"har-{n}"
    status = field(res, "status", int, f"{where}.response")
    if status == 0:  # Chrome: the request failed or was blocked before an answer came
        error = res.get("_error") or entry.get("_error") or "no response in the HAR file"
        return Exchange(flow, request, None, str(error), unknown)
    res_headers = har_headers(res, f"{where}.response")
    content, res_unknown = response_body(res, res_headers, f"{where}.response", sidecar)
    ended = started + max(float(entry.get("time") or 0), 0) / 1000
    response = make_response(status, str(res.get("statusText") or ""), http_version(res),
                             res_headers, content, ended)
    return Exchange(flow, request, response, None, unknown + res_unknown)


def timestamp(value: Any, where: str) -> float:
    """Epoch seconds of an ISO 8601 `startedDateTime`."""
    if not isinstance(value, str):
        raise FormatError(where, "an ISO 8601 date and time")
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise FormatError(where, f"an ISO 8601 date and time, not {value[:40]!r}") from None


def http_version(message: dict) -> str:
    """HAR's httpVersion as mitmproxy names it (h2 → HTTP/2.0); HTTP/1.1 when absent."""
    version = str(message.get("httpVersion") or "").strip()
    lowered = version.lower()
    if lowered in ("h2", "http/2", "http/2.0"):
        return "HTTP/2.0"
    if lowered in ("h3", "http/3", "http/3.0"):
        return "HTTP/3"
    if lowered.startswith("http/1"):
        return version.upper()
    return "HTTP/1.1"


def har_headers(message: dict, where: str) -> list[tuple[bytes, bytes]]:
    """The message's headers in order, HTTP/2 pseudo-headers (`:authority`, …) left out."""
    pairs = []
    for i, h in enumerate(field(message, "headers", list, where)):
        name = field(h, "name", str, f"{where}.headers[{i}]")
        value = field(h, "value", str, f"{where}.headers[{i}]")
        if not name.startswith(":"):
            pairs.append((name, value))
    return latin1_pairs(pairs)


def decoded_text(obj: dict, where: str) -> bytes:
    """The bytes of a HAR `text`, base64-decoded when `encoding` says so."""
    text = field(obj, "text", str, where)
    if obj.get("encoding") == "base64":
        try:
            return base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise FormatError(f"{where}.text", "base64 (encoding is base64)") from None
    return text.encode("utf-8")


def sidecar_bytes(obj: dict, sidecar: Path) -> bytes | None:
    """A body browser-use kept in `<har>_har_parts/<_file>`; None when it is not there."""
    name = obj.get("_file")
    if not isinstance(name, str) or "/" in name or name.startswith("."):
        return None
    try:
        return (sidecar / name).read_bytes()
    except OSError:
        return None


def request_body(req: dict, method: str, where: str, sidecar: Path) -> tuple[bytes | None, tuple[str, ...]]:
    """The request body and, if the HAR lacks it, (REQUEST,) — with `None`, never b'' for unknown."""
    post = req.get("postData")
    if isinstance(post, dict):
        if "text" in post:
            return decoded_text(post, f"{where}.postData"), ()
        if (data := sidecar_bytes(post, sidecar)) is not None:
            return data, ()
        params = post.get("params")
        if isinstance(params, list) and "urlencoded" in str(post.get("mimeType", "")):
            pairs = [(field(p, "name", str, f"{where}.postData.params[{i}]"), str(p.get("value", "")))
                     for i, p in enumerate(params)]
            return urlencode(pairs).encode("ascii"), ()
        return None, (REQUEST,)
    size = req.get("bodySize")
    if isinstance(size, int) and (size > 0 or size < 0 and method.upper() not in NO_BODY_METHODS):
        return None, (REQUEST,)
    return b"", ()


def response_body(res: dict, headers: list[tuple[bytes, bytes]], where: str,
                  sidecar: Path) -> tuple[bytes | None, tuple[str, ...]]:
    """The response body as it crossed the wire (HAR text is decoded: content-encoding is redone)."""
    content = field(res, "content", dict, where)
    if "text" in content:
        data = decoded_text(content, f"{where}.content")
    elif (data := sidecar_bytes(content, sidecar)) is None:
        size = content.get("size")
        return (b"", ()) if size == 0 else (None, (RESPONSE,))
    coding = next((v.decode("latin-1").strip().lower() for k, v in headers
                   if k.lower() == b"content-encoding"), "identity")
    if data and coding not in ("", "identity"):
        try:
            data = encoding.encode(data, coding)
        except ValueError:
            pass  # an encoding mitmproxy does not know: keep the bytes the HAR holds
    return data, ()


# --- writing ---------------------------------------------------------------------------------


def write_har(exchanges: Iterable[Exchange], out: TextIO) -> int:
    """Write `exchanges` as a HAR 1.2 log to `out`; the number of entries."""
    entries = [har_entry(x) for x in exchanges]
    har = {"log": {"version": "1.2", "creator": {"name": "spillage", "version": SPILLAGE_VERSION},
                   "pages": [], "entries": entries}}
    json.dump(har, out, ensure_ascii=False, indent=1)
    out.write("\n")
    return len(entries)


def iso(ts: float) -> str:
    """`ts` as HAR's startedDateTime (ISO 8601, milliseconds, Z)."""
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def name_values(headers) -> list[dict]:
    return [{"name": k.decode("latin-1"), "value": v.decode("latin-1")} for k, v in headers.fields]


def text_of(data: bytes) -> dict:
    """HAR's text (and encoding) for `data`."""
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"text": base64.b64encode(data).decode("ascii"), "encoding": "base64"}


def har_entry(x: Exchange) -> dict:
    """One HAR entry; the request URL of a tunnel is https://host:port/."""
    req = x.request
    url = f"https://{req.host}:{req.port}/" if req.method == "CONNECT" else req.pretty_url
    request = {
        "method": req.method, "url": url, "httpVersion": req.http_version, "cookies": [],
        "headers": name_values(req.headers),
        "queryString": [{"name": k, "value": v} for k, v in parse_qsl(urlsplit(url).query, True)],
        "headersSize": -1, "bodySize": -1 if REQUEST in x.unknown_bodies else len(req.raw_content or b""),
    }
    if req.raw_content:
        request["postData"] = {"mimeType": req.headers.get("content-type", ""), **text_of(req.raw_content)}
    wait = 0.0
    if x.response is not None:
        res = x.response
        wait = max((res.timestamp_end or req.timestamp_start) - req.timestamp_start, 0) * 1000
        response = {
            "status": res.status_code, "statusText": res.reason, "httpVersion": res.http_version,
            "cookies": [], "headers": name_values(res.headers), "content": response_content(x),
            "redirectURL": res.headers.get("location", ""), "headersSize": -1,
            "bodySize": -1 if RESPONSE in x.unknown_bodies else len(res.raw_content or b""),
        }
    else:
        response = {"status": 0, "statusText": "", "httpVersion": "", "cookies": [], "headers": [],
                    "content": {"size": 0, "mimeType": ""}, "redirectURL": "", "headersSize": -1,
                    "bodySize": -1, "_error": x.error or "no response"}
    return {
        "startedDateTime": iso(req.timestamp_start), "time": round(wait, 3),
        "request": request, "response": response, "cache": {},
        "timings": {"blocked": -1, "dns": -1, "connect": -1, "ssl": -1, "send": 0,
                    "wait": round(wait, 3), "receive": 0},
        FLOW_FIELD: x.flow,
    }


def response_content(x: Exchange) -> dict:
    """HAR's content: decoded (content-encoding undone) as HAR wants, or base64 of the raw bytes."""
    res = x.response
    mime = res.headers.get("content-type", "")
    if RESPONSE in x.unknown_bodies:
        return {"size": -1, "mimeType": mime, "comment": "body unknown: not in the imported file"}
    raw = res.raw_content or b""
    try:
        data = res.get_content(strict=True) or b""
    except ValueError:
        return {"size": len(raw), "mimeType": mime, "text": base64.b64encode(raw).decode("ascii"),
                "encoding": "base64"}
    content = {"size": len(data), "mimeType": mime, "compression": len(data) - len(raw)}
    return {**content, **text_of(data)} if data else content
