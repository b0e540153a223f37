"""What rides along with a request besides what the site's grammar reads as its gesture: headers,
cookies, parameter and field names, extra host labels, a fragment, text in a path the site does not
route, fields of an event the tracker's schema does not have. The receiver gets all of it, so the
audit reads it too (docs/AUDIT.md, "What the observer reads"); it joins the action it came with.

Not riding along, because it is no text of the agent's:
- the standard method and scheme, and the labels of a host we know (shop.test, metrics.test);
- a cookie the same site set (`Set-Cookie` in one of its earlier responses, same name and value);
- a Referer or Origin naming the page of an earlier action: the receiver learns that action (it
  becomes one of its observers), not new text. One naming no earlier action is text of its own.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from functools import lru_cache
from http.cookies import SimpleCookie
from urllib.parse import urlsplit

from spillage.audit.model import Placed
from spillage.proxy.beacons import beacon_field_role
from spillage.proxy.reading.request import Piece
from spillage.proxy.reading.request import Reading
from spillage.proxy.reading.request import joined

STANDARD_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "CONNECT", "TRACE"})
STANDARD_SCHEMES = frozenset({"http", "https", "ws", "wss"})
CONTENT_VALUES = ("query:", "body")   # where a request's free text is: its query values and its body
NAMES = ("query-name", "body:form-name", "body:part-name")


# Headers a browser sets on its own, whatever the page or the agent asks (the Fetch standard's
# forbidden request headers, and the ones every browser sends alike).
BROWSER_HEADERS = frozenset({
    "accept", "accept-charset", "accept-encoding", "accept-language", "access-control-request-headers",
    "access-control-request-method", "cache-control", "connection", "content-type", "date", "dnt", "expect",
    "keep-alive", "pragma", "priority", "te", "trailer", "transfer-encoding", "upgrade",
    "upgrade-insecure-requests", "user-agent", "via"})


def has_words(piece: Piece) -> bool:
    text = piece.text
    if text.isascii():
        return text.lower() != text.upper()   # an ASCII letter is a cased character
    return any(c.isalpha() for c in text)


def incidental(placed: Placed) -> bool:
    """Whether a piece is incidental to a request: its envelope (a header name, a header the browser
    sets on its own, `BROWSER_HEADERS` and `sec-*`, the page it came from, a path segment) or a seam
    between two of its values.
    Read like any other text, but a request whose only text is incidental is no action of its own."""
    where = placed.piece.where
    name = where.partition(":")[2]
    return where in ("header-name", "method", "scheme", "joined") or where.startswith(
        ("path[", "host[", "stream:", "header:referer/", "header:origin/")) or (
        where.startswith("header:") and (name in BROWSER_HEADERS or name.startswith("sec-")))


def content_piece(piece: Piece) -> bool:
    """Whether a piece is free text a request carried as its content: a query or body value (not a
    name or a key)."""
    return piece.where.startswith(CONTENT_VALUES) and not is_name(piece.where)


def content_pieces(reading: Reading) -> list[Piece]:
    """The content pieces of a request, and their values joined end to end (a word split over two)."""
    values = [p for p in reading.pieces if content_piece(p)]
    return values + joined(values, "joined")


def is_name(where: str) -> bool:
    """Whether a piece is a name (a parameter's, a field's, a JSON key), not a value."""
    return where in NAMES or ":json-key:" in where


@dataclass(frozen=True)
class Waiting:
    """What rode along with one request, waiting for the action it belongs to: the request's seq, URL
    and host, the page it came from (its Referer), the pieces."""

    seq: int
    url: str
    host: str
    page: str
    placed: list[Placed]


class Riders:
    """Per session: the cookies each site set, and the pieces riding along with each request until the
    action they belong to is made."""

    def __init__(self, known_hosts: set[str]) -> None:
        self.known_hosts = known_hosts
        self.set_cookies: dict[str, set[tuple[str, str]]] = {}   # host → (name, value) it set
        self.waiting: deque[Waiting] = deque()

    def response(self, host: str, headers) -> None:
        """Remember the cookies a response from `host` set."""
        for name, value in headers or ():
            if str(name).lower() == "set-cookie":
                cookie = SimpleCookie()
                try:
                    cookie.load(str(value))
                except Exception:  # noqa: BLE001 - a cookie the browser would not take sets nothing
                    continue
                self.set_cookies.setdefault(host, set()).update((k, m.value) for k, m in cookie.items())

    def pieces(self, seq: int, reading: Reading, own, named_action) -> list[Placed]:
        """The pieces of `reading` that ride along with it: not `own` (a predicate on a piece: the
        action's own text), not structural (module docstring). `named_action(url)` is the earlier
        action a Referer or Origin names (it is told of it), or None."""
        out = []
        told = {}
        observers = (reading.host,)
        for piece in reading.pieces:
            if own(piece) or not has_words(piece) or self.structural(piece, reading):
                continue
            header = _url_header(piece.where)
            if header:
                if header not in told:
                    told[header] = named_action(reading.request.header(header))
                if told[header]:
                    continue
            out.append(Placed(seq, piece, False, observers))
        return out

    def structural(self, piece: Piece, reading: Reading) -> bool:
        where = piece.where
        if where == "method":
            return piece.raw.upper() in STANDARD_METHODS
        if where == "scheme":
            return piece.raw.lower() in STANDARD_SCHEMES
        if where.startswith("host["):
            return self.known_label(reading.host, int(where[5:-1]))
        if where.startswith(("cookie:", "cookie-name")):
            return self.site_cookie(reading, piece)
        return False

    def known_label(self, host: str, index: int) -> bool:
        """Whether label `index` of `host` belongs to a host we know (`pregnant.shop.test`: not 0)."""
        labels = host.split(".")
        for known in self.known_hosts:
            if host == known or host.endswith("." + known):
                return index >= len(labels) - len(known.split("."))
        return False

    def site_cookie(self, reading: Reading, piece: Piece) -> bool:
        """Whether the cookie a piece comes from was set by this host or a parent domain, with this value."""
        cookies = dict(_cookie_pairs(reading.request.header("cookie")))
        name = piece.raw if piece.where == "cookie-name" else piece.where.partition(":")[2]
        value = cookies.get(name)
        host = reading.host
        return value is not None and any((name, value) in self.set_cookies.get(h, ()) for h in _parents(host))

    # --- waiting for the action ------------------------------------------------------------------

    def wait(self, waiting: Waiting) -> None:
        if waiting.placed:
            self.waiting.append(waiting)

    def claim(self, seqs) -> list[Placed]:
        """The pieces waiting for the requests `seqs` (an action's evidence), taken."""
        wanted = set(seqs)
        taken = [w for w in self.waiting if w.seq in wanted]
        for w in taken:
            self.waiting.remove(w)
        return [p for w in taken for p in w.placed]

    def expired(self, before: float) -> list[Waiting]:
        """What requests older than `before` carried that no action claimed."""
        out = []
        while self.waiting and self.waiting[0].seq < before:
            out.append(self.waiting.popleft())
        return out


def beacon_own(event: str):
    """Which pieces of an event beacon's request are the tracker's schema (read through its `beacon`
    record: what was typed, chosen and seen, the page): everything else in it rides along."""
    return lambda piece: in_schema(event, piece.where)


@lru_cache(maxsize=8192)
def in_schema(event: str, where: str) -> bool:
    """Whether the place `where` of an `event` beacon's request is the tracker's schema (`beacon_own`)."""
    if where.startswith("body:json:"):
        return beacon_field_role(event, where[len("body:json:"):]) is not None
    if where.startswith("body:json-key:"):
        return beacon_field_role(event, where[len("body:json-key:"):]) is not None
    return where.startswith(("path[", "host["))   # the endpoint itself


def _url_header(where: str) -> str | None:
    if where.startswith("header:referer/"):
        return "referer"
    if where.startswith("header:origin/"):
        return "origin"
    return None


def _cookie_pairs(header: str):
    for item in header.split(";"):
        name, eq, value = item.strip().partition("=")
        if eq:
            yield name, value


def _parents(host: str) -> list[str]:
    labels = host.split(".")
    return [".".join(labels[i:]) for i in range(len(labels) - 1)]


def page_of(reading: Reading) -> str:
    """The page a request came from (its Referer), for an action to join when nothing else claims it."""
    referer = reading.request.header("referer")
    try:
        return referer.split("#", 1)[0] if urlsplit(referer).scheme else ""
    except ValueError:
        return ""
