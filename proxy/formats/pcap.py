"""pcap and pcapng in (HTTP/1.x over TCP, streamed) and pcap out (synthesised TCP streams).

Reading goes through scapy's RawPcapReader, one packet at a time; link, IP and TCP headers are
decoded here with `struct` (a full scapy dissection per packet would be ten times slower). A
connection is forgotten once both sides closed it, so memory holds only open connections, each its
current message and out-of-order window (proxy/tcpstreams.py). TLS and other non-HTTP streams are
noted as opaque, one `Opaque` each.

Writing gives every exchange its own TCP connection: handshake, segments of at most `MSS` bytes,
ACKs, FIN both ways, with correct checksums, through scapy's RawPcapWriter.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from mitmproxy import http
from scapy.data import MTU
from scapy.error import Scapy_Exception
from scapy.utils import RawPcapReader, RawPcapWriter, checksum

from spillage.proxy.formats.exchange import Exchange
from spillage.proxy.formats.exchange import FormatError
from spillage.proxy.formats.exchange import Opaque
from spillage.proxy.formats.exchange import Overclaim
from spillage.proxy.formats.exchange import SizedReader
from spillage.proxy.formats.tcpstreams import HTTP_METHODS
from spillage.proxy.formats.tcpstreams import HttpConnection
from spillage.proxy.formats.tcpstreams import Reassembly
from spillage.proxy.formats.tcpstreams import StreamBroken

MSS = 1460
FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10
TLS_RECORD_TYPES = (0x14, 0x15, 0x16, 0x17)
Endpoint = tuple[str, int]


# --- reading ---------------------------------------------------------------------------------


LINKTYPES = {0: "BSD loopback", 1: "Ethernet", 12: "raw IP", 14: "raw IP", 101: "raw IP", 228: "raw IP",
             229: "raw IP", 113: "Linux cooked", 276: "Linux cooked v2"}
MAX_CAPLEN = 262144   # tcpdump's largest snapshot length


def ip_payload(linktype: int, frame: bytes) -> tuple[int, bytes] | None:
    """(IP version, IP packet) of a frame, for the link types captures commonly use; None otherwise."""
    if linktype == 1:                                   # Ethernet
        ethertype, offset = struct.unpack_from("!H", frame, 12)[0], 14
        while ethertype in (0x8100, 0x88A8):            # VLAN tags
            ethertype, offset = struct.unpack_from("!H", frame, offset + 2)[0], offset + 4
        version = {0x0800: 4, 0x86DD: 6}.get(ethertype)
        return (version, frame[offset:]) if version else None
    if linktype == 113:                                 # Linux cooked capture
        version = {0x0800: 4, 0x86DD: 6}.get(struct.unpack_from("!H", frame, 14)[0])
        return (version, frame[16:]) if version else None
    if linktype == 276:                                 # Linux cooked capture v2
        version = {0x0800: 4, 0x86DD: 6}.get(struct.unpack_from("!H", frame, 0)[0])
        return (version, frame[20:]) if version else None
    if linktype == 0:                                   # BSD loopback
        family = struct.unpack_from("=I", frame, 0)[0]
        return (4 if family == 2 else 6, frame[4:]) if family in (2, 10, 24, 28, 30) else None
    if linktype in (12, 14, 101, 228, 229):             # raw IP
        return (frame[0] >> 4, frame) if frame and frame[0] >> 4 in (4, 6) else None
    return None


@dataclass(frozen=True)
class Segment:
    src: Endpoint
    dst: Endpoint
    seq: int
    flags: int
    payload: bytes


def tcp_segment(linktype: int, frame: bytes) -> Segment | None:
    """The TCP segment a frame carries; None for anything else (and for IP fragments)."""
    found = ip_payload(linktype, frame)
    if found is None:
        return None
    version, ip = found
    if version == 4:
        if len(ip) < 20 or ip[9] != 6 or struct.unpack_from("!H", ip, 6)[0] & 0x3FFF:
            return None
        header, total = (ip[0] & 0x0F) * 4, struct.unpack_from("!H", ip, 2)[0]
        src, dst = socket.inet_ntop(socket.AF_INET, ip[12:16]), socket.inet_ntop(socket.AF_INET, ip[16:20])
        tcp = ip[header:total or len(ip)]
    elif version == 6:
        if len(ip) < 40 or ip[6] != 6:
            return None
        src, dst = socket.inet_ntop(socket.AF_INET6, ip[8:24]), socket.inet_ntop(socket.AF_INET6, ip[24:40])
        tcp = ip[40:40 + struct.unpack_from("!H", ip, 4)[0]]
    else:
        return None
    if len(tcp) < 20:
        return None
    sport, dport, seq = struct.unpack_from("!HHI", tcp, 0)
    offset, flags = (tcp[12] >> 4) * 4, tcp[13]
    return Segment((src, sport), (dst, dport), seq, flags, tcp[offset:])


@dataclass
class Stream:
    """One TCP connection of the capture."""

    number: int
    ends: tuple[Endpoint, Endpoint]
    client: Endpoint | None = None
    conn: HttpConnection | None = None
    opaque: str | None = None          # why it is not read as HTTP
    broken: str | None = None          # why reading stopped
    skipped: int = 0                   # bytes not read as HTTP
    exchanges: int = 0
    dirs: dict = field(default_factory=dict)
    closed: set = field(default_factory=set)

    def label(self) -> str:
        client = self.client or self.ends[0]
        server = self.ends[1] if client == self.ends[0] else self.ends[0]
        return f"tcp {client[0]}:{client[1]} -> {server[0]}:{server[1]}"


class PcapStreams:
    """Segments in, exchanges and notes out."""

    def __init__(self) -> None:
        self.streams: dict[frozenset, Stream] = {}
        self.count = 0
        self.out: list[Exchange | Opaque] = []

    def add(self, seg: Segment, ts: float) -> None:
        key = frozenset((seg.src, seg.dst))
        stream = self.streams.get(key)
        if stream is None or seg.flags & SYN and not seg.flags & ACK and stream.closed:
            if stream is not None:
                self.finish(stream)
            self.count += 1
            stream = self.streams[key] = Stream(self.count, (seg.src, seg.dst))
        if seg.flags & SYN and stream.client is None:
            stream.client = seg.src if not seg.flags & ACK else seg.dst
        direction = stream.dirs.setdefault(seg.src, Reassembly())
        try:
            data = direction.add(seg.seq, seg.payload, bool(seg.flags & SYN), bool(seg.flags & (FIN | RST)))
            if data or seg.flags & (FIN | RST):
                self.feed(stream, seg.src, data, ts, bool(seg.flags & (FIN | RST)))
        except StreamBroken as e:
            stream.broken = str(e)
        if seg.flags & RST:
            stream.closed.update(stream.ends)
        elif seg.flags & FIN:
            stream.closed.add(seg.src)
        if len(stream.closed) == 2:
            self.finish(stream)
            del self.streams[key]

    def feed(self, stream: Stream, src: Endpoint, data: bytes, ts: float, closed: bool) -> None:
        if stream.opaque or stream.broken:
            stream.skipped += len(data)
            return
        if stream.conn is None:
            if not data:
                return
            self.classify(stream, src, data)
            if stream.opaque:
                stream.skipped += len(data)
                return
        stream.conn.now = ts
        if stream.conn.tunnel:
            stream.opaque = "a tunnel after CONNECT (TLS inside)"
            stream.skipped += len(data)
            return
        if src == stream.client:
            stream.conn.client_data(data, closed)
        else:
            stream.conn.server_data(data, closed)

    def classify(self, stream: Stream, src: Endpoint, data: bytes) -> None:
        """Decide from a stream's first bytes who the client is and whether it is HTTP/1.x."""
        if data.startswith(HTTP_METHODS):
            stream.client = src
        elif data.startswith(b"HTTP/1."):
            stream.client = next(e for e in stream.ends if e != src)
        elif data[0] in TLS_RECORD_TYPES and data[1:2] == b"\x03":
            stream.opaque = "TLS: encrypted, not decoded"
            return
        else:
            stream.opaque = "not HTTP/1.x"
            return
        server = next(e for e in stream.ends if e != stream.client)
        stream.conn = HttpConnection(server, lambda req, res: self.emit(stream, req, res))

    def emit(self, stream: Stream, request: http.Request, response: http.Response | None) -> None:
        stream.exchanges += 1
        flow = f"pcap-{stream.number}-{stream.exchanges}"
        error = None if response else "no complete response in the capture"
        self.out.append(Exchange(flow, request, response, error))

    def finish(self, stream: Stream) -> None:
        """The connection ended (or the capture did): flush it and note what was not read."""
        if stream.conn is not None and not stream.broken:
            try:
                stream.conn.server_data(b"", closed=True)
            except StreamBroken as e:
                stream.broken = str(e)
            stream.conn.close()
        gap = any(d.gap() for d in stream.dirs.values())
        if stream.opaque:
            self.out.append(Opaque(f"pcap-{stream.number}",
                                   f"{stream.label()}: {stream.opaque} ({stream.skipped} bytes)"))
        elif stream.broken or gap:
            why = stream.broken or "segments missing from the capture"
            self.out.append(Opaque(f"pcap-{stream.number}", f"{stream.label()}: HTTP not read on: {why} "
                                   f"(after {stream.exchanges} exchanges)", "broken_streams"))

    def drain(self) -> Iterator[Exchange | Opaque]:
        out, self.out = self.out, []
        yield from out


def read_pcap(path: Path) -> Iterator[Exchange | Opaque]:
    """The HTTP exchanges of a pcap/pcapng file, streamed; FormatError names the packet at fault."""
    scapy_log = logging.getLogger("scapy.runtime")
    level = scapy_log.level
    scapy_log.setLevel(logging.ERROR)   # scapy warns of a truncated packet; FormatError says it once
    try:
        yield from pcap_items(path)
    finally:
        scapy_log.setLevel(level)


def pcap_items(path: Path) -> Iterator[Exchange | Opaque]:
    size = os.path.getsize(path)
    try:
        reader = RawPcapReader(SizedReader(open(path, "rb"), size))
    except (Scapy_Exception, EOFError, struct.error, Overclaim) as e:
        raise FormatError("byte 0", f"a pcap or pcapng file header ({' '.join(str(e).split())})") from None
    if hasattr(reader, "interfaces"):
        strict_pcapng(reader)
    streams = PcapStreams()
    n = 0
    with reader:
        start = reader.f.tell()
        try:
            for frame, meta in reader:
                n += 1
                check_packet(reader, meta, frame, f"packet {n} (its record at byte {start})")
                seg = tcp_segment(packet_linktype(reader, meta), frame)
                if seg is not None:
                    streams.add(seg, packet_time(meta))
                    yield from streams.drain()
                start = reader.f.tell()
        except (Scapy_Exception, struct.error) as e:
            raise FormatError(f"packet {n + 1} (its record at byte {start})",
                              f"a pcap record ({' '.join(str(e).split())})") from None
        except Overclaim as e:
            raise FormatError(f"packet {n + 1} (its record at byte {start})",
                              f"a complete packet record; the file is truncated or its length damaged (it claims {e})") from None
        except BadBlock as e:
            raise FormatError(f"packet {n + 1} (its block at byte {start})", str(e)) from None
        end = reader.f.tell()
    if end < size:
        raise FormatError(f"packet {n + 1} (byte {end})", "a complete packet record; the file is truncated")
    if n == 0:
        raise FormatError(f"byte {end}", "at least one packet; the file holds none")
    for stream in list(streams.streams.values()):
        streams.finish(stream)
    yield from streams.drain()


class BadBlock(Exception):
    """A pcapng packet block that scapy would skip or cut short without a word; str() says what it expected."""


EPB = 6   # the enhanced packet block: interface id, timestamp, captured and original length, data


def strict_pcapng(reader) -> None:
    """Make a scapy pcapng `reader` refuse (BadBlock) a packet of an interface the file does not describe
    and an enhanced packet block whose captured length runs past its end: scapy skips the one and cuts the
    other with a warning only."""
    def known(intid: int) -> bool:
        if intid >= len(reader.interfaces):
            raise BadBlock(f"a packet of an interface the file describes; it names interface {intid}, "
                           f"the file describes {len(reader.interfaces)}")
        return True

    read_epb = reader.blocktypes[EPB]

    def epb(block: bytes, size: int):
        if len(block) >= 20:
            caplen = struct.unpack_from(reader.endian + "I", block, 12)[0]
            if 20 + caplen > len(block):
                raise BadBlock(f"a captured length that fits its block; it claims {caplen} bytes in a block of "
                               f"{len(block) + 12}: the file is damaged")
        return read_epb(block, size)

    reader._check_interface_id = known
    reader.blocktypes[EPB] = epb


def packet_linktype(reader, meta) -> int | None:
    """The link type of a packet: its interface's (pcapng) or the file's (pcap)."""
    return meta.linktype if hasattr(meta, "linktype") else getattr(reader, "linktype", None)


def check_packet(reader, meta, frame: bytes, where: str) -> None:
    """FormatError at `where` for a packet no capture tool writes: a link type not decoded here, a
    captured length over the snapshot length or MAX_CAPLEN, fewer bytes than its record claims."""
    linktype = packet_linktype(reader, meta)
    if linktype not in LINKTYPES:
        raise FormatError(where, f"a link type decoded here ({', '.join(sorted(set(LINKTYPES.values())))}); "
                                 f"this one is {linktype}")
    caplen = getattr(meta, "caplen", len(frame))
    snaplen = getattr(reader, "snaplen", 0) or MAX_CAPLEN
    if caplen > min(snaplen, MAX_CAPLEN):
        raise FormatError(where, f"at most {min(snaplen, MAX_CAPLEN)} captured bytes (the snapshot length); "
                                 f"the record claims {caplen}: the file is damaged")
    if len(frame) < min(caplen, MTU):
        raise FormatError(where, f"{caplen} bytes of packet data; the file is truncated")


def packet_time(meta) -> float:
    """Epoch seconds of a packet from pcap or pcapng metadata."""
    if hasattr(meta, "sec"):
        return meta.sec + meta.usec / 1e6
    return ((meta.tshigh << 32) | meta.tslow) / meta.tsresol


# --- writing ---------------------------------------------------------------------------------


def fake_ip(host: str) -> str:
    """A stable documentation address (198.18.0.0/15) for `host`."""
    digest = hashlib.sha256(host.encode()).digest()
    return f"198.{18 + digest[0] % 2}.{digest[1]}.{max(digest[2], 1)}"


def wire_request(r: http.Request) -> bytes:
    """The request as HTTP/1.1 bytes: origin-form target, headers as recorded, body framed."""
    headers = r.headers.copy()
    if "host" not in headers:
        headers.insert(0, "Host", r.pretty_host if r.port == {"http": 80, "https": 443}.get(r.scheme)
                       else f"{r.pretty_host}:{r.port}")
    target = r.authority if r.method == "CONNECT" else r.path
    line = f"{r.method} {target} {wire_version(r.http_version)}\r\n".encode("latin-1")
    return line + framed(headers, r.raw_content or b"", length_needed=True)


def wire_response(r: http.Response) -> bytes:
    line = f"{wire_version(r.http_version)} {r.status_code} {r.reason}\r\n".encode("latin-1")
    return line + framed(r.headers.copy(), r.raw_content or b"", length_needed=False)


def wire_version(version: str) -> str:
    return version if version.startswith("HTTP/1.") else "HTTP/1.1"


def framed(headers: http.Headers, body: bytes, length_needed: bool) -> bytes:
    """Headers and body as they go on the wire: chunked when the headers say so; else Content-Length
    set to the body's size when it states another (a HAR's decoded text) or when a request body has
    none (a response without it is delimited by FIN)."""
    chunked = "chunked" in headers.get("transfer-encoding", "").lower()
    stated = headers.get("content-length")
    if not chunked and (stated is not None and stated != str(len(body)) or
                        stated is None and body and length_needed):
        headers["Content-Length"] = str(len(body))
    if chunked:
        body = (f"{len(body):x}\r\n".encode() + body + b"\r\n" if body else b"") + b"0\r\n\r\n"
    head = b"".join(k + b": " + v + b"\r\n" for k, v in headers.fields)
    return head + b"\r\n" + body


@dataclass
class TcpWriter:
    """Packets of synthesised TCP connections, Ethernet/IPv4, into a RawPcapWriter."""

    out: RawPcapWriter
    ip_id: int = 0

    def packet(self, ts: float, src: Endpoint, dst: Endpoint, seq: int, ack: int, flags: int,
               payload: bytes = b"") -> None:
        tcp = struct.pack("!HHIIBBHHH", src[1], dst[1], seq % 2**32, ack % 2**32, 5 << 4, flags,
                          65535, 0, 0) + payload
        pseudo = socket_ip(src[0]) + socket_ip(dst[0]) + struct.pack("!BBH", 0, 6, len(tcp))
        tcp = tcp[:16] + struct.pack("!H", checksum(pseudo + tcp)) + tcp[18:]
        self.ip_id = (self.ip_id + 1) % 65536
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), self.ip_id, 0x4000, 64, 6, 0,
                         socket_ip(src[0]), socket_ip(dst[0]))
        ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
        frame = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00" + ip + tcp
        sec = int(ts)
        self.out.write_packet(frame, sec=sec, usec=int(round((ts - sec) * 1e6)) % 1000000)

    def send(self, ts: float, src: Endpoint, dst: Endpoint, seq: int, ack: int, data: bytes) -> int:
        """`data` in segments of at most MSS; the next seq."""
        for i in range(0, len(data), MSS):
            self.packet(ts, src, dst, seq + i, ack, PSH | ACK, data[i:i + MSS])
        return seq + len(data)


def socket_ip(address: str) -> bytes:
    return socket.inet_pton(socket.AF_INET, address)


def write_pcap(exchanges: Iterable[Exchange], out: BinaryIO) -> int:
    """Write each exchange as its own TCP connection to `out` (pcap, Ethernet); the number written."""
    writer = RawPcapWriter(out, linktype=1, sync=True)
    writer.write_header(None)   # scapy writes it with the first packet otherwise: none for no exchange
    tcp = TcpWriter(writer)
    n = 0
    for n, x in enumerate(exchanges, start=1):
        t0 = x.request.timestamp_start
        t1 = x.response.timestamp_end if x.response is not None and x.response.timestamp_end else t0
        client = (f"10.{(n >> 16) % 256}.{(n >> 8) % 256}.{max(n % 256, 1)}", 40000 + n % 20000)
        server = (fake_ip(x.request.pretty_host), x.request.port)
        c, s = 1000, 5000
        tcp.packet(t0, client, server, c, 0, SYN)
        tcp.packet(t0, server, client, s, c + 1, SYN | ACK)
        c, s = c + 1, s + 1
        tcp.packet(t0, client, server, c, s, ACK)
        c = tcp.send(t0, client, server, c, s, wire_request(x.request))
        tcp.packet(t0, server, client, s, c, ACK)
        if x.response is not None:
            s = tcp.send(t1, server, client, s, c, wire_response(x.response))
            tcp.packet(t1, client, server, c, s, ACK)
        tcp.packet(t1, server, client, s, c, FIN | ACK)
        tcp.packet(t1, client, server, c, s + 1, FIN | ACK)
        tcp.packet(t1, server, client, s + 1, c + 1, ACK)
    writer.flush()
    return n
