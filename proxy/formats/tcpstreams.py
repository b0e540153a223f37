"""TCP reassembly and HTTP/1.x parsing for packet captures.

`Reassembly` puts one direction's segments back in order (out-of-order segments wait, retransmitted
and overlapping bytes are dropped); `HttpConnection` reads requests and responses from the two byte
streams of one connection (Content-Length, chunked and read-until-close bodies, keep-alive with
several exchanges, HEAD/1xx/204/304 without body) with mitmproxy's own head parser. Memory per
connection is the message being read plus the out-of-order window (`MAX_PENDING`).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable

from mitmproxy import http
from mitmproxy.net.http import url
from mitmproxy.net.http.http1 import read as h1

MAX_PENDING = 16 * 1024 * 1024   # out-of-order bytes one direction may hold before we call it a gap
HTTP_METHODS = (b"GET ", b"POST ", b"PUT ", b"HEAD ", b"DELETE ", b"OPTIONS ", b"PATCH ", b"CONNECT ",
                b"TRACE ")
_LINE = re.compile(rb"\r?\n")


class StreamBroken(Exception):
    """The stream cannot be read on (bytes missing, or not HTTP/1.x): says why."""


def seq_diff(a: int, b: int) -> int:
    """a - b in 32-bit sequence space, as a signed number."""
    return ((a - b + 2**31) % 2**32) - 2**31


class Reassembly:
    """One direction of a TCP connection: segments in, in-order bytes out."""

    def __init__(self) -> None:
        self.next: int | None = None
        self.pending: dict[int, bytes] = {}
        self.pending_bytes = 0
        self.fin = False

    def add(self, seq: int, payload: bytes, syn: bool, fin: bool) -> bytes:
        """The bytes this segment makes available in order (b'' for early, old or empty ones)."""
        if syn:
            self.next = (seq + 1) % 2**32
            seq = self.next
        elif self.next is None:
            self.next = seq   # the capture began mid-stream
        out = bytearray()
        if payload:
            offset = seq_diff(seq, self.next)
            if offset > 0:
                if len(payload) > len(self.pending.get(seq, b"")):
                    self.pending_bytes += len(payload) - len(self.pending.get(seq, b""))
                    self.pending[seq] = payload
                if self.pending_bytes > MAX_PENDING:
                    raise StreamBroken(f"more than {MAX_PENDING} bytes wait for a missing segment")
            else:
                self.take(seq, payload, out)
                self.drain(out)
        if fin:
            self.fin = True
        return bytes(out)

    def take(self, seq: int, payload: bytes, out: bytearray) -> None:
        offset = seq_diff(seq, self.next)
        if offset + len(payload) <= 0:
            return   # a retransmission of bytes we have
        fresh = payload[-offset:] if offset < 0 else payload
        out += fresh
        self.next = (self.next + len(fresh)) % 2**32

    def drain(self, out: bytearray) -> None:
        """Deliver waiting segments that are now in order."""
        while self.pending:
            ready = [s for s in self.pending if seq_diff(s, self.next) <= 0]
            if not ready:
                return
            for s in sorted(ready, key=lambda s: seq_diff(s, self.next)):
                payload = self.pending.pop(s)
                self.pending_bytes -= len(payload)
                self.take(s, payload, out)

    def gap(self) -> bool:
        """True when bytes are still missing (segments wait that never became in order)."""
        return bool(self.pending)


class MessageReader:
    """Reads HTTP/1 messages of one direction from a byte stream: head, then body by its framing."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.head: http.Message | None = None
        self.size: int | None = 0    # body bytes expected; None chunked; -1 until close
        self.body = bytearray()
        self.chunk_left = 0          # bytes left in the current chunk (chunked)
        self.in_trailer = False

    def start(self, parse_head: Callable[[list[bytes]], http.Message],
              body_size: Callable[[http.Message], int | None]) -> http.Message | None:
        """Parse a head if a whole one is buffered; set up its body framing. None: need more bytes."""
        end = self.buf.find(b"\r\n\r\n")
        alt = self.buf.find(b"\n\n")
        if end < 0 and alt < 0:
            if len(self.buf) > 256 * 1024:
                raise StreamBroken("no end of HTTP head within 256 KiB")
            return None
        cut = end + 4 if end >= 0 and (alt < 0 or end <= alt) else alt + 2
        lines = [line for line in _LINE.split(bytes(self.buf[:cut])) if line]
        del self.buf[:cut]
        try:
            self.head = parse_head(lines)
            self.size = body_size(self.head)
        except ValueError as e:
            raise StreamBroken(" ".join(str(e).split())) from None
        self.body = bytearray()
        self.chunk_left, self.in_trailer = 0, False
        return self.head

    def body_done(self, closed: bool) -> bool:
        """Move buffered bytes into the body; True once the body is complete."""
        if self.size is None:
            return self.dechunk()
        if self.size < 0:
            self.body += self.buf
            self.buf.clear()
            return closed
        take = min(self.size - len(self.body), len(self.buf))
        self.body += self.buf[:take]
        del self.buf[:take]
        return len(self.body) == self.size

    def dechunk(self) -> bool:
        while True:
            if self.chunk_left:
                take = min(self.chunk_left, len(self.buf))
                self.body += self.buf[:take]
                del self.buf[:take]
                self.chunk_left -= take
                if self.chunk_left:
                    return False
                continue
            nl = self.buf.find(b"\n")
            if nl < 0:
                return False
            line = bytes(self.buf[:nl]).strip()
            del self.buf[:nl + 1]
            if self.in_trailer:
                if not line:
                    return True
                continue
            if not line:
                continue   # the CRLF after a chunk's data
            try:
                size = int(line.split(b";")[0], 16)
            except ValueError:
                raise StreamBroken(f"bad chunk size line {line[:40]!r}") from None
            if size == 0:
                self.in_trailer = True
            self.chunk_left = size


class HttpConnection:
    """The exchanges of one TCP connection; `emit(request, response)` for each complete one."""

    def __init__(self, server: tuple[str, int], emit: Callable[[http.Request, http.Response | None], None]):
        self.server = server
        self.emit = emit
        self.requests = MessageReader()
        self.responses = MessageReader()
        self.waiting: deque[http.Request] = deque()   # requests read, answer not yet complete
        self.tunnel = False
        self.now = 0.0   # time of the packet being read

    def client_data(self, data: bytes, closed: bool = False) -> None:
        """Bytes the client sent, in order."""
        r = self.requests
        r.buf += data
        while r.buf or (closed and r.head is not None):
            if self.tunnel or self.waiting and self.waiting[-1].method == "CONNECT":
                return   # tunnel bytes, or bytes after a CONNECT that wait for its answer
            if r.head is None and r.start(h1.read_request_head, h1.expected_http_body_size) is None:
                return
            if not r.body_done(closed):
                return
            request = r.head
            request.data.content = bytes(r.body)
            request.timestamp_start = request.timestamp_end = self.now
            self.locate(request)
            self.waiting.append(request)
            r.head = None
            if self.responses.buf:
                self.server_data(b"")   # an answer captured before the end of its request

    def server_data(self, data: bytes, closed: bool = False) -> None:
        """Bytes the server sent, in order."""
        r = self.responses
        r.buf += data
        while self.waiting and (r.buf or closed):
            request = self.waiting[0]
            if r.head is None:
                if r.start(h1.read_response_head,
                           lambda res: h1.expected_http_body_size(request, res)) is None:
                    return
            if not r.body_done(closed):
                return
            response = r.head
            response.data.content = bytes(r.body)
            response.timestamp_start = response.timestamp_end = self.now
            r.head = None
            if response.status_code < 200 and response.status_code != 101:
                continue   # an interim answer; the real one follows
            self.waiting.popleft()
            self.emit(request, response)
            if request.method == "CONNECT" and 200 <= response.status_code < 300 or response.status_code == 101:
                self.tunnel = True
                return
            if request.method == "CONNECT":
                self.client_data(b"")   # the client may go on on this connection

    def close(self) -> None:
        """The capture ended or both sides closed: requests left unanswered are emitted alone."""
        while self.waiting:
            self.emit(self.waiting.popleft(), None)

    def locate(self, request: http.Request) -> None:
        """An origin-form request learns its scheme, host and port from the connection."""
        if request.host:
            return
        host = url.parse_authority(request.host_header, check=False)[0] if request.host_header else ""
        request.data.host = host or self.server[0]
        request.data.port = self.server[1]
        request.data.scheme = b"https" if self.server[1] == 443 else b"http"
