"""One value decoded to a fixed point: every text an observer could recover from it without a key.

    decode_value("cHJlZ25hbnQ%3D")   # [Decoded("cHJlZ25hbnQ%3D", ()), Decoded("cHJlZ25hbnQ=", ("percent",)),
                                     #  Decoded("pregnant", ("percent", "base64"))]

Each step undoes one thing that hides text: percent-escapes (and `+` for a space after them), HTML
character references, JSON and C escapes (`\\u0070`, `\\x70`), quoted-printable, a JSON document
(its strings and keys), and base64, base64url, base32 or hex where a token decodes to text. Every
result is folded (proxy/reading/text.py). Breadth first, each distinct text once, so nesting in any
order is undone; bounded by `Budget`: results per value, steps per chain, characters per value and
a deadline shared by the whole request. A value it had to stop on says so (`Budget.stopped`).
"""

from __future__ import annotations

import base64
import binascii
import html
import json
import quopri
import re
import time
from collections import deque
from dataclasses import dataclass
from dataclasses import field
from typing import Any
from typing import Iterator
from typing import NamedTuple
from urllib.parse import unquote

from spillage.proxy.reading.text import fold

MAX_RESULTS = 64            # decodings of one value, the value itself included
MAX_CHAIN = 64              # steps in one chain (percent-encoding 64 times over is undone)
MAX_VALUE = 1 << 20         # characters of one decoded text that the next step looks at
LONG_VALUE = 64 * 1024      # a value this long gets at most LONG_RESULTS decodings
LONG_RESULTS = 8
SECONDS = 2.0               # for all the values of one request
CACHED_VALUE = 2048         # characters of a value whose decodings are kept for the next request ...
CACHED_VALUES = 8192        # ... and how many are kept
PRINTABLE = 0.8             # share of printable characters that makes decoded bytes text
WORDY = 0.8                 # share of letters that makes what a word-like token decodes to words

_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
_ENTITY = re.compile(r"&(?:#[0-9]+|#[xX][0-9A-Fa-f]+|[A-Za-z][A-Za-z0-9]*);?")
_ESCAPE = re.compile(r"\\u[0-9A-Fa-f]{4}|\\x[0-9A-Fa-f]{2}|\\[nrt\"'/\\]")
_QP = re.compile(r"=[0-9A-Fa-f]{2}|=\r?\n")
_B64_TOKEN = re.compile(r"(?<![A-Za-z0-9+/_\-=])[A-Za-z0-9+/_\-]{8,}={0,2}(?![A-Za-z0-9+/_\-=])")
_B32_TOKEN = re.compile(r"(?<![A-Za-z0-9=])[A-Za-z2-7]{7,}=*(?![A-Za-z0-9=])")
_HEX_TOKEN = re.compile(r"(?<![0-9A-Za-z])(?:[0-9A-Fa-f]{2}){4,}(?![0-9A-Za-z])")
_PLAIN_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+|\d+")   # valid base64, base32 or hex, but never meant as it
_URLSAFE = str.maketrans("-_", "+/")
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", '"': '"', "'": "'", "/": "/", "\\": "\\"}


class Decoded(NamedTuple):
    """One text recovered from a value, and the decodings that produced it, outermost first."""

    text: str
    chain: tuple[str, ...]


@dataclass
class Budget:
    """Limits shared by every value of one request: a deadline, and what was cut short."""

    deadline: float = field(default_factory=lambda: time.monotonic() + SECONDS)
    stopped: list[str] = field(default_factory=list)

    def over(self) -> bool:
        return time.monotonic() > self.deadline

    def stop(self, why: str) -> None:
        if why not in self.stopped:
            self.stopped.append(why)


def decode_value(value: str, budget: Budget | None = None, first: tuple[str, ...] = ()) -> list[Decoded]:
    """`value` (folded) and every distinct text decoding recovers from it, breadth first. `first` is
    the chain that produced `value` (a body's content coding, say). A short value is decoded once per
    process (headers and ids repeat on every request)."""
    budget = budget or Budget()
    key = (value, first)
    if key in _DONE:
        return list(_DONE[key])
    own = Budget(budget.deadline)
    results = _decode(value, own, first)
    for why in own.stopped:
        budget.stop(why)
    if len(value) <= CACHED_VALUE and not own.stopped:   # only what was read whole is kept
        if len(_DONE) >= CACHED_VALUES:
            del _DONE[next(iter(_DONE))]
        _DONE[key] = tuple(results)
    return results


_DONE: dict[tuple[str, tuple[str, ...]], tuple[Decoded, ...]] = {}


def kept(value: str, first: tuple[str, ...] = ()) -> tuple[Decoded, ...] | None:
    """The decodings of `value` kept from an earlier request (what `decode_value` gives at once), if any."""
    return _DONE.get((value, first))


def _decode(value: str, budget: Budget, first: tuple[str, ...]) -> list[Decoded]:
    start, steps = fold(value)
    results = [Decoded(start, first + steps)]
    seen = {start}
    limit = LONG_RESULTS if len(value) > LONG_VALUE else MAX_RESULTS
    queue = deque(results)
    while queue:
        current = queue.popleft()
        if len(current.chain) >= MAX_CHAIN:
            budget.stop(f"a value encoded more than {MAX_CHAIN} times over")
            continue
        if budget.over():
            budget.stop(f"decoding took more than {SECONDS:g} s")
            break
        text = current.text[:MAX_VALUE]
        if len(current.text) > MAX_VALUE:
            budget.stop(f"a value longer than {MAX_VALUE} characters: the first {MAX_VALUE} decoded")
        for name, decoded in _steps(text, current.chain):
            decoded, folding = fold(decoded)
            if decoded in seen:
                continue
            if len(results) == limit:
                budget.stop(f"a value with more than {limit} decodings")
                return results
            seen.add(decoded)
            results.append(Decoded(decoded, current.chain + (name, *folding)))
            queue.append(results[-1])
    return results


def texts(value: str, budget: Budget | None = None) -> list[str]:
    """The texts of `decode_value`, without their chains."""
    return [d.text for d in decode_value(value, budget)]


# --- one step ------------------------------------------------------------------------------------


def _steps(text: str, chain: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    """(decoding, text) for each decoding that applies to `text` and changes it."""
    if "%" in text and _PERCENT.search(text):
        yield "percent", unquote_site(text)
    if "+" in text and chain[-1:] == ("percent",):   # a form value encoded once more: its `+` a space
        yield "plus", text.replace("+", " ")
    if "&" in text and _ENTITY.search(text):
        decoded = html.unescape(text)
        if decoded != text:
            yield "entities", decoded
    if "\\" in text and _ESCAPE.search(text):
        yield "escapes", _ESCAPE.sub(_unescape, text)
    if "=" in text and _QP.search(text):
        decoded = _quoted_printable(text)
        if decoded is not None and decoded != text:
            yield "quoted-printable", decoded
    if text.lstrip()[:1] in ("{", "[", '"'):
        decoded = json_text(text)
        if decoded is not None and decoded != text:
            yield "json", decoded
    for name, pattern, decoder in _TOKENS:
        decoded = _tokens(text, pattern, decoder)
        if decoded is not None:
            yield name, decoded


def unquote_site(text: str) -> str:
    """Percent-decoded as UTF-8, or as Latin-1 when that is not valid UTF-8 (as our sites' server
    decodes a path)."""
    try:
        return unquote(text, errors="strict")
    except UnicodeDecodeError:
        return unquote(text, encoding="latin-1")


def _unescape(m: re.Match) -> str:
    token = m.group()
    if token[1] in "ux":
        return chr(int(token[2:], 16))
    return _ESCAPES[token[1]]


def _quoted_printable(text: str) -> str | None:
    try:
        data = quopri.decodestring(text.encode("utf-8"))
    except (ValueError, binascii.Error):
        return None
    return _as_text(data)


def _as_text(data: bytes) -> str | None:
    """`data` as UTF-8 text, when it is that and mostly printable."""
    try:
        decoded = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    good = sum(1 for c in decoded if (c.isprintable() or c in "\t\n\r"))
    return decoded if decoded and good >= PRINTABLE * len(decoded) else None


def parse_json(text: str) -> Any:
    """The JSON document `text` holds (None when it holds none; NaN and Infinity are not JSON)."""

    def reject(constant: str):
        raise ValueError(f"non-finite number {constant}")

    try:
        return json.loads(text, parse_constant=reject)
    except (ValueError, RecursionError):
        return None


def json_text(text: str) -> str | None:
    """For a JSON document: its string values and keys joined by " | " (so no word spans two)."""
    doc = parse_json(text)
    if doc is None:
        return None
    strings = [s for _, s, _ in json_walk(doc)]
    return " | ".join(strings) if strings else None


def json_walk(doc: Any, limit: int = 100_000) -> Iterator[tuple[str, str, bool]]:
    """(JSON path, string, whether it is a key) for every key and string value, in document order
    (a key before its value); at most `limit` of them."""
    stack: list[tuple[str, Any, bool]] = [("$", doc, False)]
    n = 0
    while stack and n < limit:
        path, item, is_key = stack.pop()
        if is_key or isinstance(item, str):
            n += 1
            yield path, item, is_key
        elif isinstance(item, dict):
            for key, value in reversed(list(item.items())):
                child = f"{path}.{key}"
                stack += [(child, value, False), (child, str(key), True)]
        elif isinstance(item, list):
            stack.extend(reversed([(f"{path}[{i}]", value, False) for i, value in enumerate(item)]))


def _tokens(text: str, pattern: re.Pattern, decoder) -> str | None:
    """`text` with each token of `pattern` that `decoder` turns into text replaced by that text;
    None when there is none. A token that reads as a word or a number is taken as one, unless what
    it decodes to is words (`MFSGQZA` is base32 of `adhd`; `50697474…` hex of `Pittsburgh`)."""
    changed = False

    def replace(m: re.Match) -> str:
        nonlocal changed
        token = m.group()
        decoded = decoder(token)
        if decoded is not None and _PLAIN_WORD.fullmatch(token) and not _wordy(decoded):
            decoded = None
        if decoded is None:
            return token
        changed = True
        return decoded

    out = pattern.sub(replace, text)
    return out if changed else None


def _wordy(text: str) -> bool:
    """Whether decoded text is words: letters and spaces, most of it letters."""
    letters = sum(c.isalpha() for c in text)
    return len(text) >= 3 and letters >= WORDY * len(text) and all(c.isalpha() or c in " -'" for c in text)


def _base64(token: str) -> str | None:
    data = token.rstrip("=").translate(_URLSAFE)
    try:
        return _as_text(base64.b64decode(data + "=" * (-len(data) % 4), validate=True))
    except (binascii.Error, ValueError):
        return None


def _base32(token: str) -> str | None:
    data = token.rstrip("=").upper()
    if len(data) % 8 in (1, 3, 6):
        return None
    try:
        return _as_text(base64.b32decode(data + "=" * (-len(data) % 8)))
    except (binascii.Error, ValueError):
        return None


def _hex(token: str) -> str | None:
    return _as_text(bytes.fromhex(token))


_TOKENS = (("base64", _B64_TOKEN, _base64), ("base32", _B32_TOKEN, _base32), ("hex", _HEX_TOKEN, _hex))
