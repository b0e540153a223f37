"""Text as an observer reads it: NFKC, default-ignorable code points removed, and letters that are
confusable with Latin ones folded to them (Unicode's UTS #39 skeletons, from ICU).

`fold` is what every reader of the wire applies last, after each decoding: a `prеgnаnt` with
Cyrillic letters, a zero-width space or soft hyphen inside a word, fullwidth `ｐｒｅｇｎａｎｔ`, combining
marks stacked on a letter (`p⃛regnant`) all read as `pregnant`. ASCII text is returned as it is: skeletons also map `1` to `l` and `m` to `rn`, which
would garble every number and word they touch, so only non-ASCII letters are folded, and only to
ASCII letters.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

import icu

NFKC, IGNORABLES, MARKS, CONFUSABLES = "nfkc", "ignorables", "marks", "confusables"


def _ignorable_table() -> dict[int, None]:
    """Every Default_Ignorable_Code_Point (ICU's property data), mapped to nothing."""
    found = icu.UnicodeSet("[:Default_Ignorable_Code_Point:]")
    return {cp: None for i in range(found.getRangeCount())
            for cp in range(ord(found.getRangeStart(i)), ord(found.getRangeEnd(i)) + 1)}


_IGNORABLE = _ignorable_table()
_SPOOF = icu.SpoofChecker()


@lru_cache(maxsize=65536)
def _folded_char(c: str) -> str:
    """`c`'s UTS #39 skeleton when that is ASCII letters (Cyrillic `а` → `a`), else `c`."""
    skeleton = _SPOOF.getSkeleton(0, c)
    return skeleton if skeleton.isascii() and skeleton.isalpha() else c


def fold(text: str) -> tuple[str, tuple[str, ...]]:
    """`text` as an observer reads it, and which normalisations changed it (ignorables, nfkc, marks:
    combining marks dropped, confusables), in the order they were applied."""
    if text.isascii():
        return text, ()
    steps = []
    out = text.translate(_IGNORABLE)
    if out != text:
        steps.append(IGNORABLES)
    normal = unicodedata.normalize("NFKC", out)
    if normal != out:
        steps.append(NFKC)
        out = normal.translate(_IGNORABLE)
    if not out.isascii():
        bare = unicodedata.normalize("NFC", "".join(c for c in unicodedata.normalize("NFD", out)
                                                     if unicodedata.category(c) != "Mn"))
        if bare != out:
            steps.append(MARKS)
            out = bare
    if not out.isascii():
        folded = "".join(c if c.isascii() or not c.isalpha() else _folded_char(c) for c in out)
        if folded != out:
            steps.append(CONFUSABLES)
            out = folded
    return out, tuple(steps)


def folded(text: str) -> str:
    """`fold(text)`'s text alone."""
    return fold(text)[0]
