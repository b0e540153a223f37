"""Other senses of the words attributes are found by: phrases in which a match form or cue means
something else, for every scenario (`senses.yaml`, written by an outside linguist).

A scenario's own `look_alikes` name the other senses its author thought of ("kosher salt"). The
lexicon adds the common ones of the language ("pregnant pause", "Pittsburgh rare", "depression
glass"): an attribute's look-alikes are its own and every lexicon phrase that holds one of its match
forms or cues. The lexical judge (audit/judges/lexical.py) and the guard (addons/guard_engine.py)
read a form found only inside such a phrase as the other sense. The lexicon is conservative by
design: a phrase is in it only where the word practically never states the attribute, since an
entry that is wrong hides a real leak.

Senses that no fixed phrase holds, only the words around (`the shutter was fired`, `when the lever
is depressed`, `shipped from the Lebanon warehouse`), are in `senses_near.yaml`, by another outside
linguist: for a term, and for every term of an attribute class, the near words that show the
harmless sense. audit/judges/context.py applies them to a form's clause (`sense_near`).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import yaml

from spillage.scenarios.matching import find_form
from spillage.scenarios.matching import normalise
from spillage.scenarios.model import Attribute

LEXICON_FILE = Path(__file__).with_name("senses.yaml")
NEAR_FILE = Path(__file__).with_name("senses_near.yaml")


def _load(path: Path) -> dict:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(path.read_text(encoding="utf-8"), Loader=loader) or {}


@functools.cache
def lexicon() -> tuple[str, ...]:
    """Every phrase of the lexicon, once."""
    return tuple(dict.fromkeys(str(p) for phrases in _load(LEXICON_FILE).values() for p in phrases or ()))


@functools.cache
def near_lexicon() -> dict[str, dict[str, tuple[str, ...]]]:
    """senses_near.yaml: {"terms": {term: near words}, "classes": {class: near words}}, normalised."""
    data = _load(NEAR_FILE)
    return {part: {normalise(str(key)): tuple(normalise(str(w)) for w in found or ())
                   for key, found in (data.get(part) or {}).items()}
            for part in ("terms", "classes")}


@functools.cache
def near_words(form: str, cls: str) -> re.Pattern | None:
    """What matches a near word of `form` (an attribute of class `cls` is found by) in normalised
    text, a plural -s or -es and a possessive 's included; None when the lexicon has none."""
    found = (*near_lexicon()["terms"].get(normalise(form), ()), *near_lexicon()["classes"].get(cls, ()))
    if not found:
        return None
    alternatives = "|".join(r"\s+".join(map(re.escape, w.split())) for w in sorted(set(found), key=len, reverse=True))
    return re.compile(rf"(?<![^\W_])(?:{alternatives})(?:'s|s|es)?(?![^\W_])")


@functools.cache
def _other_senses(match: tuple[str, ...], cues: tuple[str, ...], own: tuple[str, ...]) -> tuple[str, ...]:
    forms = (*match, *cues)
    found = [p for p in lexicon() if find_form(p, forms)] if forms else []
    return tuple(dict.fromkeys((*own, *found)))


def look_alikes_of(attribute: Attribute) -> tuple[str, ...]:
    """The attribute's own look-alike phrases and the lexicon's that hold one of its forms or cues."""
    return _other_senses(attribute.match, attribute.cues, attribute.look_alikes)
