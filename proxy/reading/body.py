"""A request body as its receiver reads it: every content coding undone (each gzip member, each zstd
frame), a compressed upload opened by its magic bytes, text decoded by its charset (or its BOM, or
its shape: UTF-16 without a charset), multipart parts with their own transfer encodings.

    body = unpack(data, content_encoding)     # Unpacked(data, codings, unread)
    text, charset = body_text(body.data, charset)

Bounded: at most MAX_BODY bytes come out of all decompression; what is cut says so in `unread`.
"""

from __future__ import annotations

import base64
import binascii
import bz2
import codecs
import lzma
import quopri
import zlib
from dataclasses import dataclass
from dataclasses import field
from email.message import Message
from email.utils import collapse_rfc2231_value

MAX_BODY = 8 << 20          # bytes a body yields after decompression
MAX_LAYERS = 4              # compressions inside compressions (an upload of a .gz inside gzip)
MAX_PARTS = 1000            # multipart parts read

_MAGIC = ((b"\x1f\x8b", "gzip"), (b"\x28\xb5\x2f\xfd", "zstd"), (b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"))


@dataclass
class Unpacked:
    """A body's bytes with its codings undone, the codings (outermost first), and what was not read."""

    data: bytes
    codings: tuple[str, ...] = ()
    unread: list[str] = field(default_factory=list)


def unpack(data: bytes, content_encoding: str = "") -> Unpacked:
    """`data` with the codings of `content_encoding` undone, last applied first, then any compressed
    stream its magic bytes announce (a `.gz` upload): at most MAX_BODY bytes out."""
    out = Unpacked(data)
    for coding in reversed([c.strip().lower() for c in content_encoding.split(",") if c.strip()]):
        if coding == "identity":
            continue
        decoder = _DECODERS.get(coding)
        if decoder is None:
            out.unread.append(f"content coding {coding!r}, which no reader undoes")
            return out
        if not _undo(out, coding, decoder):
            return out
    for _ in range(MAX_LAYERS):
        coding = next((name for magic, name in _MAGIC if out.data.startswith(magic)), None)
        if coding is None or not _undo(out, f"{coding} (by its magic bytes)", _DECODERS[coding], quiet=True):
            break
    return out


def _undo(out: Unpacked, name: str, decoder, quiet: bool = False) -> bool:
    """Apply one decoder to `out` in place; whether it decoded."""
    try:
        data, complete = decoder(out.data)
    except Exception:  # noqa: BLE001 - a stream that does not decode is read as it is
        if not quiet:
            out.unread.append(f"the {name} stream does not decode: read as it is")
        return False
    out.data, out.codings = data, out.codings + (name,)
    if not complete:
        out.unread.append(f"more than {MAX_BODY} bytes after {name}: the first {MAX_BODY} read")
    return True


def _members(data: bytes, start) -> tuple[bytes, bool]:
    """Every member or frame of a stream (gzip members, zstd frames, bzip2 streams) decoded one after
    another by `start()`'s decompressors, up to MAX_BODY bytes."""
    out = bytearray()
    rest = data
    while rest and len(out) < MAX_BODY:
        d = start()
        out += d.decompress(rest, max_length=MAX_BODY - len(out))
        if not d.eof:
            return bytes(out), len(out) < MAX_BODY
        rest = d.unused_data.lstrip(b"\x00")   # gzip members may be padded with zeros
    return bytes(out[:MAX_BODY]), not rest


def _gzip(data: bytes) -> tuple[bytes, bool]:
    return _members(data, lambda: zlib.decompressobj(47))   # gzip or zlib header


def _deflate(data: bytes) -> tuple[bytes, bool]:
    try:
        return _members(data, lambda: zlib.decompressobj(15))
    except zlib.error:
        return _members(data, lambda: zlib.decompressobj(-15))   # raw deflate, as some clients send


def _brotli(data: bytes) -> tuple[bytes, bool]:
    import brotli

    out = brotli.Decompressor().process(data, output_buffer_limit=MAX_BODY)
    return out[:MAX_BODY], len(out) < MAX_BODY


def _zstd(data: bytes) -> tuple[bytes, bool]:
    try:
        from compression import zstd  # Python 3.14
    except ImportError:
        from backports import zstd
    return _members(data, zstd.ZstdDecompressor)


_DECODERS = {"gzip": _gzip, "x-gzip": _gzip, "deflate": _deflate, "br": _brotli, "zstd": _zstd,
             "bzip2": lambda d: _members(d, bz2.BZ2Decompressor), "xz": lambda d: _members(d, lzma.LZMADecompressor)}


# --- text ----------------------------------------------------------------------------------------

_BOMS = ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"), (codecs.BOM_UTF8, "utf-8"),
         (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))


def media_type(content_type: str) -> tuple[str, dict[str, str]]:
    """The media type and its parameters (lower-case names) of a Content-Type value."""
    msg = Message()
    msg["content-type"] = content_type
    params = {k.lower(): collapse_rfc2231_value(v) for k, v in (msg.get_params([]) or [])[1:]}
    return content_type.partition(";")[0].strip().lower(), params


def body_text(data: bytes, charset: str | None = None) -> tuple[str, str]:
    """`data` as text and the charset read: a BOM first, then `charset`, then UTF-16 when every other
    byte is NUL, then UTF-8, then Windows-1252; errors replaced."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            return data[len(bom):].decode(name, errors="replace"), name
    if charset:
        try:
            name = codecs.lookup(charset).name
        except LookupError:
            name = ""
        if name:
            return data.decode(name, errors="replace"), name
    sixteen = _utf16(data)
    if sixteen:
        return data.decode(sixteen, errors="replace"), sixteen
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace"), "cp1252"


def _utf16(data: bytes) -> str | None:
    """utf-16-le or -be when NULs fill the odd or the even bytes of `data` (text without a BOM)."""
    sample = data[:4096]
    if len(sample) < 4 or b"\x00" not in sample:
        return None
    even, odd = sample[0::2], sample[1::2]
    if odd.count(0) >= 0.8 * len(odd) and even.count(0) < 0.2 * len(even):
        return "utf-16-le"
    if even.count(0) >= 0.8 * len(even) and odd.count(0) < 0.2 * len(odd):
        return "utf-16-be"
    return None


def is_text(text: str, share: float = 0.8) -> bool:
    """Whether at least `share` of `text` is printable (U+FFFD, a decoding error, is not)."""
    good = sum(1 for c in text[:65536] if (c.isprintable() or c in "\t\n\r") and c != "\ufffd")
    return bool(text) and good >= share * min(len(text), 65536)


# --- multipart -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Part:
    """One part of a multipart body: its form name, file name, headers and content, the content with
    its transfer encoding undone (`transfer` names it)."""

    name: str
    filename: str | None
    headers: tuple[tuple[str, str], ...]
    content: bytes
    transfer: str = ""

    @property
    def content_type(self) -> str:
        return next((v for k, v in self.headers if k.lower() == "content-type"), "")


def multipart_parts(data: bytes, boundary: str) -> list[Part] | None:
    """The parts of a multipart body (None when it has none: not multipart, or no boundary)."""
    if not boundary:
        return None
    chunks = data.split(b"--" + boundary.encode("latin-1", errors="replace"))[1:]
    parts: list[Part] = []
    for chunk in chunks[:MAX_PARTS]:
        if chunk.startswith(b"--"):
            break
        head, sep, content = chunk.lstrip(b"\r\n").partition(b"\r\n\r\n")
        if not sep:
            head, sep, content = chunk.lstrip(b"\r\n").partition(b"\n\n")
        if not sep:
            continue
        parts.append(_part(head.decode("utf-8", errors="replace"), content.removesuffix(b"\n").removesuffix(b"\r")))
    return parts or None


def _part(head: str, content: bytes) -> Part:
    msg = Message()
    headers = []
    for line in head.splitlines():
        name, colon, value = line.partition(":")
        if colon:
            headers.append((name.strip(), value.strip()))
            msg[name.strip()] = value.strip()
    transfer = (msg.get("content-transfer-encoding") or "").strip().lower()
    if transfer == "base64":
        try:
            content = base64.b64decode(b"".join(content.split()), validate=True)
        except (binascii.Error, ValueError):
            transfer = ""
    elif transfer == "quoted-printable":
        content = quopri.decodestring(content)
    else:
        transfer = ""
    name = msg.get_param("name", header="content-disposition") or ""
    name = collapse_rfc2231_value(name) if not isinstance(name, str) else name
    return Part(name, msg.get_filename(), tuple(headers), content, transfer)
