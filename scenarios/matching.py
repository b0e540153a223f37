"""Find an attribute's surface forms in text the way an observer would read it.

A form occurs in a text when its pieces occur in order, as whole words, once both are
normalised (`normalise`). Within that:

- Pieces of a form separated by space, '-', '_' or '+' may be separated by any run of those.
  Two words of 3+ letters may also be written together ("laid off" ~ "laidoff"), and so may a
  number and a unit of 2+ letters ("16 GB" ~ "16gb"); shorter words may not ("co-op" is not
  "coop", "2A" is not "2 a").
- A word of 3+ ASCII letters also matches its inflections as lemminflect's lexicon gives them
  (plurals, verb forms, comparatives; irregular ones too: "wife" finds "wives", "lay" finds
  "laid"), and, for a word the lexicon does not know (a name, an acronym) or knows only as an
  adjective that does not compare ("Catholic", unlike "new"), the regular plural of the noun.
  Inflections are only added to the form's words, never stripped from the text's: "kettle" finds
  "kettles", but "kettles" does not find "kettle", "diabetes" is never "diabete", "pregnant" never
  "pregnancy" (derivations change meaning: they are not inflections).
- An apostrophe in a form's word is optional ("crohn's" ~ "crohns").
- A number matches with or without thousands commas ("1200" ~ "1,200") and never inside a
  longer number ("130" not in "2130", "1,130" or "130.5").
- A dollar amount ("$130", "130 dollars", "usd 130", "130 bucks", "$30k") matches the same
  amount written any of those ways, with cents ".00", "$ 130", "US$130", "130-dollar" or "130$";
  a bare number ("130") is not an amount.
"""

import os
import re
import unicodedata
from decimal import Decimal
from functools import lru_cache
from typing import NamedTuple

from spillage.proxy.reading.text import folded

_STRAIGHTEN = str.maketrans({
    **dict.fromkeys("\u2018\u2019\u201a\u201b\u2032\u02bc", "'"),
    **dict.fromkeys("\u201c\u201d\u201e\u201f\u2033", '"'),
    **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
    "ø": "o", "ł": "l", "đ": "d", "ı": "i", "æ": "ae", "œ": "oe",
})
_DIACRITICS = re.compile("[\u0300-\u036f]")  # combining marks of Latin, Greek and Cyrillic


@lru_cache(maxsize=65536)
def normalise(text: str) -> str:
    """Folded as an observer reads it (proxy/reading/text.py: NFKC, default-ignorables dropped,
    confusables folded), case-folded, Latin diacritics dropped, quotes and dashes straightened,
    whitespace collapsed."""
    if not text.isascii():
        text = folded(text).casefold()
        text = _DIACRITICS.sub("", unicodedata.normalize("NFD", text))
        text = unicodedata.normalize("NFC", text).translate(_STRAIGHTEN)
    return " ".join(text.lower().split())


_SEP = r"[\s\-_+]"
_EDGE_BEFORE = r"(?<![^\W_])"  # `_` separates words too (kosher_kitchen states "kosher")
_EDGE_AFTER = r"(?![^\W_])"
_PIECE = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+(?:'[^\W\d_]+)*|\S")
_NUMBER = re.compile(r"(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?")
_CURRENCY_WORDS = {"dollar", "dollars", "usd", "buck", "bucks"}
_CLOSE_UP = re.compile(r"\s+([,.;:!?)\]])")   # no space left before punctuation where a form was taken out


class _Unit(NamedTuple):
    kind: str   # word, num, sym or money
    text: str   # the piece; for money the amount
    gap: bool   # separated from the unit before it


class _Matcher(NamedTuple):
    needle: str  # a substring every match contains: a cheap test before the regex
    pattern: re.Pattern


def _units(form: str) -> list[_Unit]:
    """The pieces of the normalised form: words, numbers and other symbols."""
    units: list[_Unit] = []
    for chunk in re.split(_SEP + "+", normalise(form)):
        for i, m in enumerate(_PIECE.finditer(chunk)):
            piece = m.group()
            kind = "num" if piece[0].isdigit() else "word" if piece[0].isalpha() else "sym"
            units.append(_Unit(kind, piece, i == 0 and bool(units)))
    return units


def _amount_at(units: list[_Unit], i: int) -> tuple[Decimal, int] | None:
    """The number at `i` (times 1000 with an attached "k") and the index after it."""
    if i >= len(units) or units[i].kind != "num" or not _NUMBER.fullmatch(units[i].text):
        return None
    value = Decimal(units[i].text.replace(",", ""))
    if i + 1 < len(units) and units[i + 1] == _Unit("word", "k", False):
        return value * 1000, i + 2
    return value, i + 1


def _money_at(units: list[_Unit], i: int) -> tuple[Decimal, int] | None:
    """A dollar amount starting at `i` ("$130", "us$130", "usd 130", "130 dollars"), if any."""
    u = units[i]
    if u.text == "us" and i + 1 < len(units) and units[i + 1] == _Unit("sym", "$", False):
        return _money_at(units, i + 1)
    if u.text in ("$", "usd"):
        return _amount_at(units, i + 1)
    amount = _amount_at(units, i)
    if amount and amount[1] < len(units) and units[amount[1]].text in _CURRENCY_WORDS | {"$"}:
        return amount[0], amount[1] + 1
    return None


def _with_money(units: list[_Unit]) -> list[_Unit]:
    """`units` with each dollar amount folded into one money unit."""
    out, i = [], 0
    while i < len(units):
        money = _money_at(units, i)
        if money:
            out.append(_Unit("money", str(money[0]), units[i].gap))
            i = money[1]
        else:
            out.append(units[i])
            i += 1
    return out


def _inflections(word: str) -> list[str]:
    """`word` and its inflections (for words of 3+ ASCII letters), from lemminflect: every form of
    every part of speech its lexicon gives the word (`lay` → laid, laying; `wife` → wives), and, for a
    word it does not know (a name, an acronym) or knows only as an adjective that does not compare
    (`catholic`, not `new`), the plural its rules make of the noun (`crohns`, `catholics`)."""
    if not re.fullmatch(r"[a-z]{3,}", word):
        return [word]
    import lemminflect  # here: it brings numpy (a third of a second), which loading a scenario needs not

    lexicon = lemminflect.getAllInflections(word)
    forms = [f for tagged in lexicon.values() for f in tagged]
    if set(lexicon) <= {"JJ"}:
        forms += lemminflect.getAllInflectionsOOV(word, "NOUN")["NNS"]
    return list(dict.fromkeys([word, *forms]))


def _grouped(digits: str) -> str:
    """Integer digits with optional thousands commas: "30000" → "30,?000"."""
    head = len(digits) % 3 or 3
    return ",?".join([digits[:head]] + [digits[j:j + 3] for j in range(head, len(digits), 3)])


def _number_regex(piece: str) -> str:
    m = _NUMBER.fullmatch(piece)
    body = _grouped(m[1].replace(",", "")) + re.escape(m[2] or "") if m else re.escape(piece)
    return rf"(?<!\d[.,]){body}(?![.,]\d)"


def _money_regex(amount: str) -> str:
    whole, _, cents = amount.partition(".")
    cents = cents.rstrip("0")
    number = _grouped(whole) + (rf"\.{cents}0*" if cents else r"(?:\.0+)?")
    value = Decimal(amount)
    if not cents and value >= 1000 and value % 1000 == 0:
        number = f"(?:{number}|{_grouped(str(value // 1000))}k)"
    number = rf"(?<!\d)(?<!\d[.,]){number}(?![.,]?\d)"
    return (rf"(?:(?:{_EDGE_BEFORE}us)?\$[\s+]?{number}|{_EDGE_BEFORE}usd{_SEP}?{number}"
            rf"|{_EDGE_BEFORE}{number}{_SEP}?(?:\$|usd|dollars?|bucks?))")


def _word_regex(word: str) -> str:
    if "'" in word:
        return "'?".join(map(re.escape, word.split("'")))
    variants = sorted(map(re.escape, _inflections(word)), key=len, reverse=True)
    return f"(?:{'|'.join(variants)})" if len(variants) > 1 else variants[0]


def _regex(unit: _Unit) -> str:
    if unit.kind == "word":
        return _word_regex(unit.text)
    if unit.kind == "num":
        return _number_regex(unit.text)
    if unit.kind == "money":
        return _money_regex(unit.text)
    return re.escape(unit.text)


def _needle(unit: _Unit) -> str:
    """A literal every text matching `unit` contains."""
    if unit.kind == "word":
        return os.path.commonprefix(_inflections(unit.text)).split("'")[0]
    if unit.kind in ("num", "money"):
        digits = unit.text.replace(",", "").partition(".")[0]
        return digits[:len(digits) % 3 or 3]
    return unit.text


def _letters(unit: _Unit) -> int:
    return len(unit.text.replace("'", "")) if unit.kind == "word" else 0


def _join(a: _Unit, b: _Unit) -> str:
    """What may stand between two units of a form in the text."""
    fused = (b.gap and _letters(a) >= 3 and _letters(b) >= 3) or (
        {a.kind, b.kind} == {"num", "word"} and _letters(a) + _letters(b) >= 2)
    if fused:
        return _SEP + ("*" if b.gap else "?")
    return _SEP + "+" if b.gap else ""


@lru_cache(maxsize=16384)
def _matcher(form: str) -> _Matcher | None:
    units = _with_money(_units(form))
    if not units:
        return None
    parts = [_regex(units[0])]
    for a, b in zip(units, units[1:]):
        parts += [_join(a, b), _regex(b)]
    needle = max(map(_needle, units), key=len)
    edge = _EDGE_BEFORE if units[0].kind in ("word", "num") else ""  # "$" and symbols are edges
    return _Matcher(needle, re.compile(edge + "".join(parts) + _EDGE_AFTER))


@lru_cache(maxsize=4096)
def _matchers(forms: tuple[str, ...]) -> tuple[tuple[str, _Matcher], ...]:
    """(form, its matcher) for each of `forms` that has one, in order."""
    return tuple((form, matcher) for form in forms if (matcher := _matcher(form)) is not None)


def find_form(text: str, forms: tuple[str, ...]) -> str | None:
    """The first of `forms` that occurs in `text` (see the module docstring for how)."""
    return _found(text, tuple(forms))


@lru_cache(maxsize=65536)
def _found(text: str, forms: tuple[str, ...]) -> str | None:
    """find_form's answer, kept: the same texts are read for every attribute, action and request."""
    haystack = normalise(text)
    for form, matcher in _matchers(forms):
        if matcher.needle in haystack and matcher.pattern.search(haystack):
            return form
    return None


def haystack(texts) -> str:
    """`texts` normalised, one per line: where `may_occur` looks for forms in all of them at once."""
    return "\n".join(map(normalise, texts))


def may_occur(haystack: str, forms: tuple[str, ...]) -> bool:
    """Whether one of `forms` may occur in a text of `haystack` (from `haystack()`); False when none can,
    as the text lacks the literal that every occurrence of each holds (which has no space or line in it)."""
    return any(matcher.needle in haystack for _, matcher in _matchers(tuple(forms)))


def spans(haystack: str, form: str) -> list[tuple[int, int]]:
    """Where `form` occurs in `haystack`, a text already `normalise`d: (start, end) of each match."""
    matcher = _matcher(form)
    if matcher is None or matcher.needle not in haystack:
        return []
    return [m.span() for m in matcher.pattern.finditer(haystack)]


def without_forms(text: str, phrases: tuple[str, ...]) -> str:
    """`text`, normalised, with every occurrence of `phrases` blanked out: what is left once the
    phrases in which a form means something else ("kosher salt") are set aside."""
    haystack = normalise(text)
    for phrase in phrases:
        matcher = _matcher(phrase)
        if matcher and matcher.needle in haystack:
            haystack = matcher.pattern.sub(lambda m: " " * len(m.group(0)), haystack)
    return haystack


@lru_cache(maxsize=4096)
def _ignoring_case(pattern: re.Pattern) -> re.Pattern:
    return re.compile(pattern.pattern, re.IGNORECASE)


def redact_forms(text: str, forms: tuple[str, ...]) -> tuple[str, list[str]]:
    """`text` with every occurrence of `forms` taken out and the spaces around it closed up, and the
    forms that occurred. ASCII text keeps its case; other text comes back normalised (lower case,
    diacritics dropped), as matching reads it."""
    ascii_text = text.isascii()
    work = text if ascii_text else normalise(text)
    lowered = work.lower() if ascii_text else work
    found = []
    for form, matcher in _matchers(tuple(forms)):
        if matcher.needle not in lowered:
            continue
        work, n = (_ignoring_case(matcher.pattern) if ascii_text else matcher.pattern).subn("", work)
        if n:
            found.append(form)
            lowered = work.lower() if ascii_text else work
    return (_CLOSE_UP.sub(r"\1", " ".join(work.split())), found) if found else (text, found)
