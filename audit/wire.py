"""The free text an HTTP request carried, with what hides text on the wire undone.

`decode_value` undoes the encodings of one value (percent-encoding, `+` for space, HTML
entities, base64, JSON); `request_texts` finds the values of a request (query, path, form,
JSON and multipart bodies) and decodes each; `texts_of` does it for a capture record.
Bounded and never raising on malformed input: what cannot be parsed is read as plain text
or skipped.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import html
import json
import os
import re
import zlib
from collections import deque
from email.message import Message
from email.utils import collapse_rfc2231_value
from typing import Any, Iterator
from urllib.parse import unquote

from spillage.proxy.capturelog import read_body

MAX_DECODINGS = 16           # results of decode_value, the value itself included
MAX_VALUE = 64 * 1024        # characters of a value that decoding looks at
MAX_BODY = 1024 * 1024       # bytes of a body that are read (after decompression too)
PRINTABLE = 0.8              # share of printable characters that makes bytes text

_BASE64 = re.compile(r"[A-Za-z0-9+/]{8,}={0,2}|[A-Za-z0-9_\-]{8,}={0,2}")
_PLAIN_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+|\d+")  # valid base64 too, but never meant as it
_URLSAFE = str.maketrans("-_", "+/")
_SCHEME_AUTHORITY = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.\-]*://[^/?#]*")


# --- one value ---------------------------------------------------------------------------


def decode_value(value: str) -> list[str]:
    """`value` and every distinct decoding of it, breadth first, at most MAX_DECODINGS.

    Decodings chain (a percent-encoded base64 of JSON is undone step by step); base64 is
    undone at most once in a chain, and only the first MAX_VALUE characters are decoded.
    """
    results = [value]
    queue = deque([(value[:MAX_VALUE], False)])
    while queue:
        text, after_base64 = queue.popleft()
        for decoded, is_base64 in _decodings(text, after_base64):
            if decoded in results:
                continue
            results.append(decoded)
            if len(results) == MAX_DECODINGS:
                return results
            queue.append((decoded[:MAX_VALUE], after_base64 or is_base64))
    return results


def _decodings(text: str, after_base64: bool) -> Iterator[tuple[str, bool]]:
    """One step of decoding `text`: (decoded, whether by base64) for each decoder that applies."""
    for decoded in (*_percent(text), *_entities(text), *_json_strings_of(text)):
        yield decoded, False
    if not after_base64:
        for decoded in _base64(text):
            yield decoded, True


def _unquote(text: str) -> str:
    """Percent-decoded as UTF-8, or as Latin-1 when that is not valid UTF-8."""
    try:
        return unquote(text, errors="strict")
    except UnicodeDecodeError:
        return unquote(text, encoding="latin-1")


def _percent(text: str) -> list[str]:
    """Percent-decoded, and with `+` read as a space (as in queries and forms)."""
    out = [_unquote(text)] if "%" in text else []
    if "+" in text:
        out.append(_unquote(text.replace("+", " ")))
    return [t for t in out if t != text]


def _entities(text: str) -> list[str]:
    """HTML character references (`&amp;`, `&#39;`, `&#x27;`, `&eacute;`) resolved."""
    if "&" not in text:
        return []
    decoded = html.unescape(text)
    return [decoded] if decoded != text else []


def _is_text(text: str) -> bool:
    """True when at least PRINTABLE of `text` is printable (U+FFFD, a decoding error, is not)."""
    good = sum(1 for c in text if (c.isprintable() or c in "\t\n\r") and c != "\ufffd")
    return bool(text) and good >= PRINTABLE * len(text)


def _base64(text: str) -> list[str]:
    """The base64 or base64url `text` decoded, when it is that, not a plain word or number,
    and the result is valid UTF-8 text."""
    text = text.strip()
    if not _BASE64.fullmatch(text) or _PLAIN_WORD.fullmatch(text):
        return []
    data = text.rstrip("=").translate(_URLSAFE)
    try:
        decoded = base64.b64decode(data + "=" * (-len(data) % 4), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return []
    return [decoded] if _is_text(decoded) else []


def _json_strings_of(text: str) -> list[str]:
    """For a JSON `text`: its string values joined by " | " (so no form spans two of them),
    then each value that may itself be encoded, to be decoded further."""
    if text.lstrip()[:1] not in ("{", "[", '"'):
        return []
    doc = _parse_json(text)
    strings = list(json_strings(doc))
    if not strings:
        return []
    encoded = [s for s in strings if "%" in s or "&" in s or _BASE64.fullmatch(s.strip())]
    return [" | ".join(strings), *encoded]


def _parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def json_strings(doc: Any) -> Iterator[str]:
    """The string values of a parsed JSON document in document order (not its keys)."""
    stack = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))


# --- one request -------------------------------------------------------------------------


def request_texts(url: str, headers: list[list[str]], body: bytes | None) -> list[str]:
    """Every free-text string a request carried, each decoded with `decode_value`: query
    values, path segments with spaces or %-escapes, and the body's values (form, JSON,
    multipart text parts and file names, plain text). Distinct and non-blank, in order."""
    texts = [*_url_texts(url), *_body_texts(_header(headers, "content-type"),
                                            _decompressed(body or b"", _header(headers, "content-encoding")))]
    return [t for t in dict.fromkeys(texts) if t.strip()]


def texts_of(record: dict[str, Any], session_dir: str | os.PathLike[str]) -> list[str]:
    """`request_texts` of a capture `request` or `egress_blocked` record; its body is read
    with `read_body`, which raises CaptureError for a body that does not match its hash."""
    body = read_body(session_dir, record.get("body"))
    return request_texts(record.get("url") or "", record.get("headers") or [], body)


def _header(headers: list[list[str]], name: str) -> str:
    """The first value of header `name` (any case), else ""."""
    for pair in headers:
        if len(pair) == 2 and str(pair[0]).lower() == name:
            return str(pair[1])
    return ""


def _url_texts(url: str) -> list[str]:
    """Decoded query values, and path segments that hold spaces or percent-escapes."""
    rest = url.partition("#")[0]
    path, _, query = rest.partition("?")
    segments = _SCHEME_AUTHORITY.sub("", path).split("/")
    texts = [t for s in segments if "%" in s or " " in s for t in decode_value(s)]
    return texts + _form_texts(query)


def _form_texts(query: str) -> list[str]:
    """Decoded values of `a=1&b=2` (a part without `=` is a value of its own)."""
    values = [part.partition("=")[2] if "=" in part else part for part in query.split("&")]
    return [t for v in values if v for t in decode_value(v)]


def _media_type(content_type: str) -> tuple[str, dict[str, str]]:
    """The media type and its parameters (lower-case names) of a Content-Type value."""
    msg = Message()
    msg["content-type"] = content_type
    params = {k.lower(): collapse_rfc2231_value(v) for k, v in msg.get_params([])[1:]}
    return content_type.partition(";")[0].strip().lower(), params


def _decode(data: bytes, charset: str | None) -> str:
    """`data` as text in `charset` (UTF-8 when unknown), errors replaced, BOM dropped."""
    try:
        codec = codecs.lookup(charset or "utf-8").name
    except LookupError:
        codec = "utf-8"
    return data.decode(codec, errors="replace").lstrip("\ufeff")


def _decompressed(body: bytes, encoding: str) -> bytes:
    """The first MAX_BODY bytes of `body` with its content codings undone, last applied first (gzip,
    deflate, br, zstd), as far as each can be; never more than MAX_BODY bytes of output."""
    body = body[:MAX_BODY]
    for coding in reversed([c.strip().lower() for c in encoding.split(",") if c.strip()]):
        decoder = _DECODERS.get(coding)
        if decoder is None:
            return body
        try:
            body = decoder(body)
        except Exception:  # noqa: BLE001 - a body that does not decode is read as it is
            return body
    return body


def _inflate(body: bytes) -> bytes:
    for wbits in (47, -15):  # gzip or zlib header; raw deflate
        try:
            return zlib.decompressobj(wbits).decompress(body, MAX_BODY)
        except zlib.error:
            continue
    raise ValueError("not deflate data")


def _unbrotli(body: bytes) -> bytes:
    import brotli
    return brotli.Decompressor().process(body, output_buffer_limit=MAX_BODY)[:MAX_BODY]


def _unzstd(body: bytes) -> bytes:
    try:
        from compression import zstd  # Python 3.14
    except ImportError:
        from backports import zstd
    return zstd.ZstdDecompressor().decompress(body, max_length=MAX_BODY)


_DECODERS = {"gzip": _inflate, "x-gzip": _inflate, "deflate": _inflate, "br": _unbrotli, "zstd": _unzstd,
             "identity": lambda body: body}


def _body_texts(content_type: str, data: bytes) -> list[str]:
    """The decoded values of a body of `content_type`."""
    if not data:
        return []
    mime, params = _media_type(content_type)
    if mime == "multipart/form-data":
        parts = _multipart_texts(data, params.get("boundary", ""))
        if parts is not None:
            return parts
    text = _decode(data, params.get("charset"))
    if mime == "application/x-www-form-urlencoded":
        return _form_texts(text)
    if mime == "application/json" or mime.endswith("+json"):
        return _json_texts(text)
    if mime.startswith("text/") or _is_text(text[:MAX_VALUE]):
        return decode_value(text)
    return []


def _json_texts(text: str) -> list[str]:
    """Each string value decoded (one JSON document, or one per line); else the text."""
    docs = [_parse_json(text)]
    if docs[0] is None:
        docs = [_parse_json(line) for line in text.splitlines() if line.strip()]
    if any(doc is None for doc in docs):
        return decode_value(text)
    return [t for doc in docs for s in json_strings(doc) for t in decode_value(s)]


def _multipart_texts(data: bytes, boundary: str) -> list[str] | None:
    """Texts of each part (file parts: only their file name); None if there are no parts."""
    if not boundary:
        return None
    chunks = data.split(b"--" + boundary.encode("latin-1", errors="replace"))[1:]
    texts: list[str] = []
    found = False
    for chunk in chunks:
        if chunk.startswith(b"--"):
            break
        head, sep, content = chunk.lstrip(b"\r\n").partition(b"\r\n\r\n")
        if not sep:
            head, sep, content = chunk.lstrip(b"\r\n").partition(b"\n\n")
        if not sep:
            continue
        found = True
        texts += _part_texts(_decode(head, None), content.removesuffix(b"\n").removesuffix(b"\r"))
    return texts if found else None


def _part_texts(head: str, content: bytes) -> list[str]:
    """Texts of one multipart part given its header block."""
    part = Message()
    for line in head.splitlines():
        name, colon, value = line.partition(":")
        if colon:
            part[name.strip()] = value.strip()
    filename = part.get_filename()
    if filename is not None:
        return decode_value(filename)
    return _body_texts(part.get("content-type", "text/plain; charset=utf-8"), content)
