"""One request as its receiver gets it: `read_request` turns a `WireRequest` into a `Reading`, whose
`pieces` are every text the receiver could read in it, each with where it was and how it was hidden.

Where (`Piece.where`), outermost first:

    method, scheme, host[i] (a label), path[i] (a segment), query:NAME, query-name, fragment,
    header:NAME, header-name, cookie:NAME, cookie-name, header:referer/…, header:origin/… (a URL
    read as one: its labels, segments and parameters), body (text), body:form:NAME, body:form-name,
    body:json:PATH, body:json-key:PATH, body:part:NAME, body:part-name, body:part-filename:NAME,
    body:line[i] (a JSON line)

The structured views are read the way our sites read them (waitress and falcon: the path
percent-decoded as UTF-8, the query and urlencoded forms with `+` for a space): `path`, `segments`,
`params`, `form`, `document` (a JSON body), `beacon()` (an event endpoint's event and payload).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cached_property
from functools import lru_cache
from typing import Any
from typing import Iterable
from typing import NamedTuple
from urllib.parse import parse_qsl
from urllib.parse import urlsplit

from spillage.proxy.reading.body import Part
from spillage.proxy.reading.body import body_text
from spillage.proxy.reading.body import is_text
from spillage.proxy.reading.body import media_type
from spillage.proxy.reading.body import multipart_parts
from spillage.proxy.reading.body import unpack
from spillage.proxy.reading.decode import Budget
from spillage.proxy.reading.decode import decode_value
from spillage.proxy.reading.decode import json_walk
from spillage.proxy.reading.decode import kept
from spillage.proxy.reading.decode import parse_json
from spillage.proxy.reading.decode import unquote_site

FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
URL_HEADERS = ("referer", "origin")
SKIPPED_HEADERS = ("host", "content-length")   # the host is read from the URL; a length is a number
BEACON_EVENT_FIELDS = ("t", "type", "event")
MAX_PIECES = 20_000
_INDEX = re.compile(r"\[\d+\]")
MADE_VALUES = 8192      # values whose pieces are kept (of those whose decodings decode.py keeps)
SEAM_WORDS = 3          # words either side of a seam between two values that `joined` reads as one text


class Piece(NamedTuple):
    """One text a request carried: folded and decoded (`text`), where it was, the decodings that
    produced it (outermost first), and the value as it was on the wire (`raw`)."""

    text: str
    where: str
    decodings: tuple[str, ...]
    raw: str
    parts: tuple[str, ...] = ()   # a `joined` piece: the two values whose seam it is

    def as_json(self) -> dict:
        return {"where": self.where, "decodings": list(self.decodings), "raw": self.raw[:500]}


@dataclass(frozen=True)
class WireRequest:
    """A request as the proxy or a capture record has it: method, absolute URL (with the fragment
    when the client sent one), headers in order, body bytes."""

    method: str
    url: str
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes | None = None

    @classmethod
    def of_record(cls, record: dict, session_dir: str | os.PathLike[str] | None) -> WireRequest:
        """The request of a capture `request` or `egress_blocked` record (its body read with
        `read_body`, which raises CaptureError for a body that does not match its hash)."""
        from spillage.proxy.capturelog import read_body

        body = read_body(session_dir, record.get("body")) if record.get("body") else None
        headers = tuple((str(k), str(v)) for k, v in (pair for pair in record.get("headers") or () if len(pair) == 2))
        return cls(str(record.get("method") or ""), str(record.get("url") or ""), headers, body)

    def header(self, name: str) -> str:
        """The first value of header `name` (any case), else ""."""
        return next((v for k, v in self.headers if k.lower() == name), "")

    def content_type(self) -> str:
        """The Content-Type, sent once or repeated with one value; "" when absent or when repeated
        values disagree (no one can then tell the body's type)."""
        values = {v.strip() for k, v in self.headers if k.lower() == "content-type"}
        return values.pop() if len(values) == 1 else ""


def read_request(request: WireRequest) -> Reading:
    return Reading(request)


class Reading:
    """What the receiver of `request` gets (module docstring). Every view is computed when first asked."""

    def __init__(self, request: WireRequest) -> None:
        self.request = request
        self.budget = Budget()

    # --- the URL ---------------------------------------------------------------------------------

    @cached_property
    def url_parts(self):
        try:
            return urlsplit(self.request.url)
        except ValueError:
            return urlsplit("")

    @cached_property
    def host(self) -> str:
        try:
            return (self.url_parts.hostname or "").lower()
        except ValueError:
            return ""

    @cached_property
    def path(self) -> str:
        """The path as the site's router sees it: percent-decoded as UTF-8 (Latin-1 where that fails)."""
        return unquote_site(self.url_parts.path or "/")

    @cached_property
    def segments(self) -> list[str]:
        return [s for s in self.path.split("/") if s]

    @cached_property
    def params(self) -> list[tuple[str, str]]:
        """The query's parameters as the site parses them (`+` a space, blanks kept), in order."""
        return _pairs(self.url_parts.query)

    def param_values(self) -> dict[str, list[str]]:
        """The parameters by name."""
        out: dict[str, list[str]] = {}
        for name, value in self.params:
            out.setdefault(name, []).append(value)
        return out

    # --- the body --------------------------------------------------------------------------------

    @cached_property
    def media(self) -> tuple[str, dict[str, str]]:
        return media_type(self.request.content_type())

    @cached_property
    def unpacked(self):
        return unpack(self.request.body or b"", self.request.header("content-encoding"))

    @cached_property
    def text(self) -> str:
        """The body as text, by its charset, BOM or shape ("" when there is none)."""
        return body_text(self.unpacked.data, self.media[1].get("charset"))[0] if self.unpacked.data else ""

    @cached_property
    def parts(self) -> list[Part] | None:
        if self.media[0] != "multipart/form-data":
            return None
        return multipart_parts(self.unpacked.data, self.media[1].get("boundary", ""))

    @cached_property
    def form(self) -> list[tuple[str, str]] | None:
        """[(name, value)] when the body is a submitted form (urlencoded, or multipart: a file part's
        value is its content as text), else None."""
        if not self.request.body or self.media[0] not in FORM_TYPES:
            return None
        if self.media[0] == "multipart/form-data":
            return [(p.name, body_text(p.content, media_type(p.content_type)[1].get("charset"))[0])
                    for p in self.parts or ()]
        return _pairs(self.text)

    @cached_property
    def document(self) -> Any:
        """The body's JSON document (one, or a list of one per line), when it is JSON; else None."""
        if not self.unpacked.data or self.media[0] in FORM_TYPES:
            return None
        doc = parse_json(self.text)
        if doc is None and "\n" in self.text.strip():
            lines = [parse_json(line) for line in self.text.splitlines() if line.strip()]
            doc = lines if lines and all(line is not None for line in lines) else None
        return doc

    def beacon(self) -> tuple[str, Any]:
        """An event endpoint's event name and JSON payload (`unknown`, None when it is not JSON)."""
        return self.event

    @cached_property
    def event(self) -> tuple[str, Any]:
        doc = (self.document if isinstance(self.document, dict) else parse_json(self.text)) if self.unpacked.data else None
        if doc is None:
            return "unknown", None
        if isinstance(doc, dict):
            for name in BEACON_EVENT_FIELDS:
                if isinstance(doc.get(name), str):
                    return doc[name], doc
        return "unknown", doc

    @property
    def unread(self) -> list[str]:
        """What this reading could not read, for a reader that must say so (the guard refuses)."""
        self.pieces  # noqa: B018 - reading them is what finds out
        return [*self.unpacked.unread, *self.budget.stopped, *self._unread]

    # --- every piece -----------------------------------------------------------------------------

    @cached_property
    def pieces(self) -> list[Piece]:
        self._unread: list[str] = []
        out: list[Piece] = []
        r, p = self.request, self.url_parts
        out += self._values("method", r.method)
        out += self._values("scheme", p.scheme)
        out += self._url_pieces("", self.request.url)
        for name, value in r.headers:
            lower = name.lower()
            if lower in SKIPPED_HEADERS:
                continue
            out += self._values("header-name", name)
            if lower == "cookie":
                out += self._cookies(value)
            elif lower in URL_HEADERS:
                out += self._url_pieces(f"header:{lower}/", value)
            else:
                out += self._values(f"header:{lower}", value)
        out += self._body_pieces()
        if len(out) > MAX_PIECES:
            self._unread.append(f"more than {MAX_PIECES} texts in one request: the first {MAX_PIECES} read")
        return out[:MAX_PIECES]

    def _values(self, where: str, raw: str, first: tuple[str, ...] = (), value: str | None = None) -> list[Piece]:
        """`raw` (or its site-decoded `value`) and every decoding of it, as pieces at `where` (made once
        for the decodings `decode_value` keeps: headers and ids repeat on every request)."""
        if not raw or not raw.strip():
            return []
        text = raw if value is None else value
        decodings = kept(text, first)
        if decodings is None:
            return [Piece(d.text, where, d.chain, raw) for d in decode_value(text, self.budget, first) if d.text.strip()]
        made = _MADE.get((where, raw))
        if made is None or made[0] is not decodings:
            if len(_MADE) >= MADE_VALUES:
                del _MADE[next(iter(_MADE))]
            made = _MADE[(where, raw)] = (decodings, tuple(Piece(d.text, where, d.chain, raw)
                                                           for d in decodings if d.text.strip()))
        return list(made[1])

    def _url_pieces(self, prefix: str, url: str) -> list[Piece]:
        """The labels of a URL's host, its path segments, parameter names and values, its fragment."""
        try:
            parts = urlsplit(url)
            host = parts.hostname or ""
        except ValueError:
            return self._values(f"{prefix}url", url)
        out = []
        for i, label in enumerate(host.split(".") if host else ()):
            out += self._values(f"{prefix}host[{i}]", label)
        for i, segment in enumerate(s for s in (parts.path or "").split("/") if s):
            out += self._values(f"{prefix}path[{i}]", segment)
        for raw_name, raw_value, name, value in _raw_pairs(parts.query):
            out += self._values(f"{prefix}query-name", raw_name, _site(raw_name, name), name)
            out += self._values(f"{prefix}query:{name}", raw_value, _site(raw_value, value), value)
        out += self._values(f"{prefix}fragment", parts.fragment)
        return out

    def _cookies(self, header: str) -> list[Piece]:
        out = []
        for item in header.split(";"):
            name, eq, value = item.strip().partition("=")
            if not eq:
                out += self._values("cookie", name)
                continue
            out += self._values("cookie-name", name)
            out += self._values(f"cookie:{name}", value)
        return out

    def _body_pieces(self) -> list[Piece]:
        data = self.unpacked.data
        if not data:
            return []
        codings = self.unpacked.codings
        mime = self.media[0]
        if mime == "application/x-www-form-urlencoded":
            return self._form_pieces(_raw_pairs(self.text), codings)
        if mime == "multipart/form-data" and self.parts is not None:
            return [piece for part in self.parts for piece in self._part_pieces(part, codings)]
        doc = self.document
        if doc is not None:
            return self._json_pieces("body", doc, codings)
        if mime.startswith("text/") or is_text(self.text):
            return self._values("body", self.text, codings)
        self._unread.append(f"a body of {len(data)} bytes that is not text ({mime or 'no type'})")
        return []

    def _form_pieces(self, pairs, codings) -> list[Piece]:
        out = []
        for raw_name, raw_value, name, value in pairs:
            out += self._values("body:form-name", raw_name, codings + _site(raw_name, name), name)
            out += self._values(f"body:form:{name}", raw_value, codings + _site(raw_value, value), value)
        return out

    def _part_pieces(self, part: Part, codings: tuple[str, ...]) -> list[Piece]:
        out = self._values("body:part-name", part.name, codings)
        if part.filename is not None:
            out += self._values(f"body:part-filename:{part.name}", part.filename, codings)
        inner = unpack(part.content, "")
        self._unread += inner.unread
        chain = codings + ((part.transfer,) if part.transfer else ()) + inner.codings
        mime, params = media_type(part.content_type)
        text = body_text(inner.data, params.get("charset"))[0]
        if mime.startswith("text/") or not mime or is_text(text):
            doc = parse_json(text) if text.lstrip()[:1] in ("{", "[") else None
            if doc is not None:
                return out + self._json_pieces(f"body:part:{part.name}", doc, chain)
            return out + self._values(f"body:part:{part.name}", text, chain)
        self._unread.append(f"a multipart part {part.name!r} of {len(inner.data)} bytes that is not text")
        return out

    def _json_pieces(self, where: str, doc: Any, codings: tuple[str, ...]) -> list[Piece]:
        out = []
        keys, values, chain = f"{where}:json-key:", f"{where}:json:", codings + ("json",)
        for path, text, is_key in json_walk(doc):
            out += self._values((keys if is_key else values) + path, text, chain)
        return out


_MADE: dict[tuple[str, str], tuple[tuple, tuple[Piece, ...]]] = {}   # (where, raw) → (the decodings, their pieces)


def _pairs(query: str) -> list[tuple[str, str]]:
    """`a=1&b=2` as the site parses it: `+` a space, percent-decoded as UTF-8, blanks kept (bytes
    that are not UTF-8 as surrogate escapes, which a record writes as `%XX`)."""
    try:
        return parse_qsl(query, keep_blank_values=True, errors="surrogateescape")
    except ValueError:
        return []


def _raw_pairs(query: str) -> list[tuple[str, str, str, str]]:
    """(raw name, raw value, name, value) of each `name=value` of a query or urlencoded form."""
    out = []
    for part in query.split("&")[:MAX_PIECES]:
        if not part:
            continue
        raw_name, _, raw_value = part.partition("=")
        out.append((raw_name, raw_value, unquote_site(raw_name.replace("+", " ")),
                    unquote_site(raw_value.replace("+", " "))))
    return out


def _site(raw: str, decoded: str) -> tuple[str, ...]:
    """The decoding the site itself applied to a query or form value, as a chain."""
    return ("percent",) if raw != decoded else ()


@lru_cache(maxsize=8192)
def _unindexed(where: str) -> str:
    """A place without its list indexes (`body:json:$.items[3].id` → `body:json:$.items[].id`)."""
    return _INDEX.sub("[]", where)


def joined(pieces: Iterable[Piece], where: str) -> list[Piece]:
    """Words split over two values of one request (two parameters, two fields of an event): where one
    value ends in a letter and the next begins with one, the words around the seam, joined end to end
    and with a space (`preg` + `nant`: `pregnant`; `lost my` + `job`: `lost my job`); a reader counts
    only what spans the seam (`parts` are the two sides: what one side says alone is that value's). Each value is
    taken in its first decoding; a value with no seam to its neighbour gives nothing."""
    firsts: dict[tuple[str, str], Piece] = {}
    for piece in pieces:   # each value once: a repeated parameter's values, a list's items, one after another
        firsts.setdefault((_unindexed(piece.where), piece.raw), piece)
    values = list(firsts.values())
    out = []
    for a, b in zip(values, values[1:]):
        left, right = a.text.rstrip(), b.text.lstrip()
        if b.text.startswith(a.text) or a.text.startswith(b.text):
            continue   # one value grown from the other (a field's text as it was typed): no seam between
        if left[-1:].isalpha() and right[:1].isalpha():
            tail, head = left.split()[-SEAM_WORDS:], right.split()[:SEAM_WORDS]
            raw, parts = f"{a.raw}&{b.raw}", (" ".join(tail), " ".join(head))
            out += [Piece(" ".join(tail[:-1] + [tail[-1] + head[0]] + head[1:]), where, ("joined",), raw, parts),
                    Piece(" ".join(tail + head), where, ("joined",), raw, parts)]
    return out
