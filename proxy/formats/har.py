"""HAR 1.2 (http://www.softwareishard.com/blog/har-12-spec/) in and out.

Reads what Chrome DevTools, Playwright's `record_har`, browser-use's `record_har_path`, chrome-har and
mitmproxy's `hardump` write: `postData.text` or only `postData.params`, base64 `content.encoding`,
bodies kept in attached files (`_file`: in Playwright's zip container, beside the HAR, or in
browser-use's `<name>_har_parts/`), omitted bodies (unknown, not empty), entries without a response
(Chrome's status 0, Playwright's -1), HTTP/2 pseudo-headers (dropped: the proxy never sees them either),
entries served from the browser's cache (Chrome's `_fromCache`, Playwright's `_transferSize` 0: skipped,
they never crossed the wire). What the file cannot
carry is said as `Lack`s. A HAR is one JSON document, so it is read whole.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import zipfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import parse_qsl, urlencode, urlsplit

from mitmproxy.net import encoding

from spillage.proxy.documents import finite_float
from spillage.proxy.documents import refuse_constant
from spillage.proxy.formats.exchange import REQUEST
from spillage.proxy.formats.exchange import RESPONSE
from spillage.proxy.formats.exchange import Exchange
from spillage.proxy.formats.exchange import FormatError
from spillage.proxy.formats.exchange import Lack
from spillage.proxy.formats.exchange import latin1_pairs
from spillage.proxy.formats.exchange import make_request
from spillage.proxy.formats.exchange import make_response
from spillage.proxy.version import SPILLAGE_VERSION

NO_BODY_METHODS = ("GET", "HEAD", "OPTIONS", "CONNECT")
FLOW_FIELD = "_flowId"   # our custom field: the flow id of the record the entry came from
ZIP_MAGIC = b"PK\x03\x04"
# HAR creators that record in the browser (log.browser says so too); mitmproxy and spillage record on the wire
BROWSER_RECORDERS = ("webinspector", "firefox", "playwright", "browser-use", "chrome-har", "browsertime")

# What a HAR cannot carry (the import record's `lacks`; docs/CAPTURE_FILES.md)
LACK_UNLOAD_BEACONS = "beacons sent as a page unloads (browser-recorded HAR)"
LACK_NO_ANSWER = "requests that got no answer (chrome-har drops them)"
LACK_OWN_REQUESTS = "the browser's own requests, such as /favicon.ico (Playwright HAR)"
LACK_CANCELLED = "answers to requests the browser cancelled (HAR)"
LACK_REQUEST_BODIES = "request bodies (HAR omit mode)"
LACK_RESPONSE_BODIES = "response bodies (HAR omit mode)"
LACK_SOME_BODIES = "some response bodies, which the recorder did not save (HAR)"
LACK_REDIRECTS = "requests that were redirected: only the request each led to is kept (browser-use HAR)"
LACK_PLAIN_HTTP = "every http:// request: only https is recorded (browser-use HAR)"
LACK_UNANSWERED = "answers the recorder did not wait for, to requests sent as a page was left (browser-use HAR)"
LACK_ATTACHED = "bodies whose attached files are missing (HAR attach mode)"


NO_RESPONSE = "no response in the HAR file"
MAX_HAR_BYTES = 512 << 20   # read whole (JSON): a bigger document would take gigabytes as Python objects


def read_har(path: Path) -> Iterator[Exchange | Lack]:
    """The exchanges of a HAR file (or of Playwright's zip of a HAR and its attachments), in file order,
    each new thing the file lacks before the first exchange it shows in; FormatError names the entry and
    field at fault."""
    with har_source(path) as (data, attachments):
        log = field(parse_json(data), "log", dict, "")
        entries = field(log, "entries", list, "log")
        said: set[str] = set()
        for what in recorder_lacks(log):
            said.add(what)
            yield Lack(what)
        some_bodies = any(kept_body(e) for e in entries)   # then a missing one was not saved: no omit mode
        recorder = str((log.get("creator") or {}).get("name", "")).lower() if isinstance(log.get("creator"), dict) else ""
        for n, entry in enumerate(entries):
            where = f"log.entries[{n}]"
            if not isinstance(entry, dict):
                raise FormatError(where, "an object")
            item, lacks = entry_exchange(entry, where, n, attachments)
            lacks = [LACK_SOME_BODIES if what == LACK_RESPONSE_BODIES and some_bodies else what for what in lacks]
            if recorder == "browser-use" and item is not None and item.error == NO_RESPONSE:
                lacks.append(LACK_UNANSWERED)
            for what in lacks:
                if what not in said:
                    said.add(what)
                    yield Lack(what)
            if item is not None:
                yield item


class Attachments:
    """The files a HAR names in `_file`: members of its zip container, or files in `folders`."""

    def __init__(self, folders: Iterable[Path] = (), archive: zipfile.ZipFile | None = None) -> None:
        self.folders = list(folders)
        self.archive = archive

    def read(self, obj: dict) -> bytes | None:
        """The bytes of the file `obj["_file"]` names; None when it names none or it is not there."""
        name = obj.get("_file")
        if not isinstance(name, str) or not name or "/" in name or "\\" in name or name.startswith("."):
            return None
        if self.archive is not None:
            try:
                if self.archive.getinfo(name).file_size > MAX_HAR_BYTES:
                    raise FormatError(f"zip member {name}", f"an attachment of at most {MAX_HAR_BYTES >> 20} MiB")
                return self.archive.read(name)
            except KeyError:
                return None
            except (zipfile.BadZipFile, OSError) as e:
                raise FormatError(f"zip member {name}", f"a readable zip member ({e})") from None
        for folder in self.folders:
            try:
                if (folder / name).stat().st_size > MAX_HAR_BYTES:
                    raise FormatError(f"file {name}", f"an attachment of at most {MAX_HAR_BYTES >> 20} MiB")
                return (folder / name).read_bytes()
            except OSError:
                continue
        return None


@contextmanager
def har_source(path: Path) -> Iterator[tuple[bytes, Attachments]]:
    """The HAR document's bytes and its attachments: the one `.har` member of a zip container, or the
    file itself with the files beside it (Playwright) and in `<name>_har_parts/` (browser-use)."""
    with open(path, "rb") as f:
        zipped = f.read(4) == ZIP_MAGIC
        size = os.fstat(f.fileno()).st_size
    if not zipped:
        if size > MAX_HAR_BYTES:
            raise FormatError("byte 0", f"a HAR document of at most {MAX_HAR_BYTES >> 20} MiB (this one is "
                              f"{size >> 20} MiB; a mitmproxy flow file or pcap of it is read as a stream)")
        yield path.read_bytes(), Attachments([path.parent / f"{path.stem}_har_parts", path.parent])
        return
    try:
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if n.endswith(".har") and "/" not in n]
            if len(names) != 1:
                raise FormatError("zip", f"one .har file in the zip container, not {len(names)}")
            if archive.getinfo(names[0]).file_size > MAX_HAR_BYTES:
                raise FormatError(f"zip member {names[0]}", f"a HAR document of at most {MAX_HAR_BYTES >> 20} MiB")
            data = archive.read(names[0])
            yield data, Attachments(archive=archive)
    except zipfile.BadZipFile as e:
        raise FormatError("zip", f"a zip container ({e})") from None


def parse_json(data: bytes) -> Any:
    """The HAR document; FormatError for text that is not UTF-8 JSON."""
    try:
        return json.loads(data.decode("utf-8-sig"), parse_float=finite_float, parse_constant=refuse_constant)
    except UnicodeDecodeError as e:
        raise FormatError(f"byte {e.start}", "UTF-8 text (a HAR file is JSON)") from None
    except json.JSONDecodeError as e:
        raise FormatError(f"line {e.lineno} column {e.colno}", f"valid JSON ({e.msg})") from None
    except RecursionError:
        raise FormatError("byte 0", "JSON nested no deeper than Python reads") from None
    except ValueError as e:  # an integer of more digits than Python converts
        raise FormatError("a number", f"valid JSON ({e})") from None


def kept_body(entry: Any) -> bool:
    """Whether a HAR entry holds its response body (as text, or in an attached file)."""
    content = (entry.get("response") or {}).get("content") if isinstance(entry, dict) else None
    return isinstance(content, dict) and bool(content.get("text") or content.get("_file"))


def recorder_lacks(log: dict) -> list[str]:
    """What the HAR lacks because of who recorded it (`log.creator`, `log.browser`)."""
    creator = log.get("creator")
    name = str(creator.get("name", "")).lower() if isinstance(creator, dict) else ""
    lacks = []
    if "browser" in log or name in BROWSER_RECORDERS:
        lacks.append(LACK_UNLOAD_BEACONS)
    if name == "chrome-har":
        lacks.append(LACK_NO_ANSWER)
    if name in ("playwright", "browser-use"):
        lacks.append(LACK_OWN_REQUESTS)
    if name == "browser-use":
        lacks += [LACK_REDIRECTS, LACK_PLAIN_HTTP]
    return lacks


KIND_NAMES = {dict: "an object", list: "an array", str: "a string", int: "a number"}


def field(obj: Any, name: str, kind: type, where: str) -> Any:
    """obj[name], which must be of `kind`; FormatError naming `where.name` otherwise."""
    value = obj.get(name) if isinstance(obj, dict) else None
    if not isinstance(value, kind) or isinstance(value, bool):
        raise FormatError(f"{where}.{name}" if where else name, KIND_NAMES[kind])
    return value


def entry_exchange(entry: dict, where: str, n: int,
                   attachments: Attachments) -> tuple[Exchange | None, tuple[str, ...]]:
    """One entry as an Exchange (None for what never crossed the wire: cache hits, data: URLs) and what
    the entry shows the file lacks."""
    req = field(entry, "request", dict, where)
    res = field(entry, "response", dict, where)
    method = field(req, "method", str, f"{where}.request")
    url = field(req, "url", str, f"{where}.request")
    if from_cache(entry, res) or urlsplit(url).scheme not in ("http", "https", ""):
        return None, ()
    started = timestamp(entry.get("startedDateTime"), f"{where}.startedDateTime")
    headers = har_headers(req, f"{where}.request")
    body, request_lack = request_body(req, method, f"{where}.request", attachments)
    unknown = (REQUEST,) if request_lack else ()
    if method.upper() == "CONNECT" and "://" in url:
        url = urlsplit(url).netloc
    try:
        request = make_request(method, url, http_version(req), headers, body, started)
    except FormatError as e:
        raise FormatError(f"{where}.request.url", e.expected) from None
    flow = entry.get(FLOW_FIELD) if isinstance(entry.get(FLOW_FIELD), str) else f"har-{n}"
    status = field(res, "status", int, f"{where}.response")
    if status <= 0:  # no response: Chrome's 0 (failed, blocked), Playwright's -1 (also: not waited for)
        error = str(res.get("_failureText") or res.get("_error") or entry.get("_error") or NO_RESPONSE)
        lacks = (request_lack, LACK_CANCELLED if error == "net::ERR_ABORTED" else None)
        return Exchange(flow, request, None, error, unknown, where), tuple(filter(None, lacks))
    res_headers = har_headers(res, f"{where}.response")
    content, response_lack = response_body(res, status, method, res_headers, f"{where}.response", attachments)
    ended = started + max(float(entry.get("time") or 0), 0) / 1000
    response = make_response(status, str(res.get("statusText") or ""), http_version(res),
                             res_headers, content, ended)
    unknown += (RESPONSE,) if response_lack else ()
    return Exchange(flow, request, response, None, unknown, where), tuple(filter(None, (request_lack, response_lack)))


def from_cache(entry: dict, res: dict) -> bool:
    """True for an entry the browser served from its cache: Chrome's `_fromCache`, or Playwright's
    response whose headers it knew while nothing was transferred (`_transferSize` 0, `headersSize` > 0)."""
    if entry.get("_fromCache") in ("memory", "disk"):
        return True
    sizes = res.get("_transferSize"), res.get("headersSize")
    return all(isinstance(n, int) and not isinstance(n, bool) for n in sizes) and sizes[0] == 0 and sizes[1] > 0


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


def request_body(req: dict, method: str, where: str, attachments: Attachments) -> tuple[bytes | None, str | None]:
    """The request body, or None and what the HAR lacks when it does not hold it: never b'' for unknown.

    A `text` of "" (or no params) where `bodySize` says there were bytes is an omitted body (Playwright's
    omit and attach modes write exactly that, the latter with the bytes in `_file`)."""
    size = req.get("bodySize")
    claimed = isinstance(size, int) and not isinstance(size, bool) and size > 0
    post = req.get("postData")
    if isinstance(post, dict):
        if (data := attachments.read(post)) is not None:
            return data, None
        data = post_text(post, f"{where}.postData")
        if data is not None and (data or not claimed):
            return data, None
        return None, LACK_ATTACHED if "_file" in post else LACK_REQUEST_BODIES
    if claimed or size == -1 and method.upper() not in NO_BODY_METHODS:
        return None, LACK_REQUEST_BODIES
    return b"", None


def post_text(post: dict, where: str) -> bytes | None:
    """postData's bytes from `text`, else rebuilt from urlencoded `params`; None when it has neither."""
    if "text" in post:
        return decoded_text(post, where)
    params = post.get("params")
    if isinstance(params, list) and "urlencoded" in str(post.get("mimeType", "")):
        pairs = [(field(p, "name", str, f"{where}.params[{i}]"), str(p.get("value", ""))) for i, p in enumerate(params)]
        return urlencode(pairs).encode("ascii")
    return None


def bodiless(status: int, method: str, headers: list[tuple[bytes, bytes]]) -> bool:
    """True when the response has no body by HTTP's rules (1xx, 204, 304, an answer to HEAD) or by its own
    `Content-Length: 0` (a redirect whose body Playwright did not keep): empty, not unknown."""
    if status < 200 or status in (204, 304) or method.upper() == "HEAD":
        return True
    lengths = {v.strip() for k, v in headers if k.lower() == b"content-length"}
    return lengths == {b"0"}


def response_body(res: dict, status: int, method: str, headers: list[tuple[bytes, bytes]], where: str,
                  attachments: Attachments) -> tuple[bytes | None, str | None]:
    """The response body as it crossed the wire (HAR text is decoded: content-encoding is redone), or
    None and what the HAR lacks when it does not hold it."""
    content = field(res, "content", dict, where)
    if (data := attachments.read(content)) is None:
        if "text" in content:
            data = decoded_text(content, f"{where}.content")
        elif content.get("size") == 0 or bodiless(status, method, headers):
            return b"", None
        else:
            return None, LACK_ATTACHED if "_file" in content else LACK_RESPONSE_BODIES
    coding = next((v.decode("latin-1").strip().lower() for k, v in headers
                   if k.lower() == b"content-encoding"), "identity")
    if data and coding not in ("", "identity"):
        try:
            data = encoding.encode(data, coding)
        except ValueError:
            pass  # an encoding mitmproxy does not know: keep the bytes the HAR holds
    return data, None


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
