"""One HTTP exchange as the capture-file readers and writers pass it around, and their error.

Readers (HAR, mitmproxy flows, pcap) yield `Exchange`s that `proxy/imports.py` turns into capture
records; `proxy/exports.py` rebuilds `Exchange`s from a session's records for the writers. Requests
and responses are mitmproxy's own objects, so the record derivation is the live proxy's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import BinaryIO
from urllib.parse import urlsplit

from mitmproxy import http

from spillage.proxy.refusal import REFUSED_BODY
from spillage.proxy.refusal import describe_refusal

REQUEST, RESPONSE = "request", "response"
UNKNOWN_BODY = "{} body is not in the imported file: unknown, not empty"


SMALL_READ = 1 << 16


class Overclaim(Exception):
    """A length prefix that claims more bytes than the file has left."""


class SizedReader:
    """A binary file that refuses a read of more than it has left before anything is allocated: a
    tnetstring's length prefix may claim a terabyte in 13 bytes, a pcap record 4 GiB in 4."""

    def __init__(self, f: BinaryIO, size: int) -> None:
        self.f, self.size = f, size

    def read(self, n: int = -1) -> bytes:
        if n is not None and n > max(self.size - self.f.tell(), SMALL_READ):  # a short read is how EOF shows
            raise Overclaim(f"{n} bytes, but the file has {self.size - self.f.tell()} left")
        return self.f.read(n)

    def peek(self, n: int = 1) -> bytes:
        return self.f.peek(n)

    def tell(self) -> int:
        return self.f.tell()

    def seek(self, offset: int, whence: int = 0) -> int:
        return self.f.seek(offset, whence)

    def close(self) -> None:
        self.f.close()


class FormatError(ValueError):
    """A capture file that cannot be read: where in it (`position`) and what was expected there."""

    def __init__(self, position: str, expected: str) -> None:
        super().__init__(f"{position}: {expected}")
        self.position = position
        self.expected = expected


@dataclass
class Exchange:
    """A request, what answered it (response, error, or nothing), and which bodies the file lacked."""

    flow: str
    request: http.Request
    response: http.Response | None = None
    error: str | None = None
    unknown_bodies: tuple[str, ...] = ()   # REQUEST / RESPONSE: the file did not hold that body
    where: str = ""                        # where in the file it was read (`log.entries[3]`), if the reader says

    def refusal(self) -> dict | None:
        """How our proxy refused this request ({background, reason}), or None if it did not.

        The proxy answers a refusal with 403 and a fixed body (proxy/refusal.py); that answer is what
        marks it in any file format."""
        r = self.response
        if r is None or r.status_code != 403 or r.raw_content != REFUSED_BODY:
            return None
        if self.request.method == "CONNECT":
            return describe_refusal(self.request.pretty_host, None, "connect")
        return describe_refusal(self.request.pretty_host, self.request.path, "request")

    def refused_url(self) -> str:
        """The url an `egress_blocked` record names: host:port for a tunnel, else the request's URL."""
        if self.request.method == "CONNECT":
            return f"{self.request.host}:{self.request.port}"
        return self.request.pretty_url


@dataclass(frozen=True)
class Opaque:
    """Traffic a file holds but that cannot be read as HTTP (a TLS stream): noted, never dropped."""

    flow: str
    message: str
    counter: str = "opaque_streams"   # the import record's count this note adds to


@dataclass(frozen=True)
class Lack:
    """Something the file cannot carry, for the import record's `lacks`: a short phrase naming it and
    the kind of file that lacks it, e.g. `request bodies (HAR omit mode)` (docs/CAPTURE_FILES.md)."""

    what: str


def make_request(method: str, url: str, http_version: str, headers: list[tuple[bytes, bytes]],
                 content: bytes | None, timestamp: float = 0.0) -> http.Request:
    """A mitmproxy request for `method url` with `headers` and `content` exactly as given (raw bytes).

    `url` is absolute, or `host:port` for CONNECT. Raises FormatError naming the URL if it is neither."""
    if method.upper() == "CONNECT":
        host, _, port = url.rpartition(":")
        scheme, path, authority = "", "", url
    else:
        parts = urlsplit(url)
        scheme, host = parts.scheme, parts.hostname or ""
        port = parts.port or {"http": 80, "https": 443}.get(scheme, 0)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        authority = ""
    try:
        port = int(port)
    except ValueError:
        port = 0
    if not host or not port:
        raise FormatError(f"url {url!r}", "an absolute http(s) URL (host:port for CONNECT)")
    return http.Request(
        host, port, method.encode("latin-1"), scheme.encode("latin-1"), authority.encode("latin-1"),
        latin1(path), http_version.encode("latin-1"), http.Headers(headers),
        content, None, timestamp, timestamp,
    )


def make_response(status: int, reason: str, http_version: str, headers: list[tuple[bytes, bytes]],
                  content: bytes | None, timestamp: float = 0.0) -> http.Response:
    """A mitmproxy response with `headers` and `content` exactly as given (raw bytes)."""
    return http.Response(
        http_version.encode("latin-1"), status, reason.encode("latin-1"), http.Headers(headers),
        content, None, timestamp, timestamp,
    )


def latin1_pairs(pairs) -> list[tuple[bytes, bytes]]:
    """Header pairs of str (as records and HAR hold them) as the bytes mitmproxy wants: Latin-1, or
    UTF-8 for text that has characters beyond it (a HAR writer decoded the bytes as UTF-8)."""
    return [(latin1(k), latin1(v)) for k, v in pairs]


def latin1(text) -> bytes:
    """`text` as bytes: Latin-1 when it fits, else UTF-8."""
    text = str(text)
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8")
