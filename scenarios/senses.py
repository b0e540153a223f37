"""Other senses of the words attributes are found by: phrases in which a match form or cue means
something else, for every scenario (`senses.yaml`, written by an outside linguist).

A scenario's own `look_alikes` name the other senses its author thought of ("kosher salt"). The
lexicon adds the common ones of the language ("pregnant pause", "Pittsburgh rare", "depression
glass"): an attribute's look-alikes are its own and every lexicon phrase that holds one of its match
forms or cues. The lexical judge (audit/judges/lexical.py) and the guard (addons/guard_engine.py)
read a form found only inside such a phrase as the other sense. The lexicon is conservative by
design: a phrase is in it only where the word practically never states the attribute, since an
entry that is wrong hides a real leak.
"""

from __future__ import annotations

import functools
from pathlib import Path

import yaml

from spillage.scenarios.matching import find_form
from spillage.scenarios.model import Attribute

LEXICON_FILE = Path(__file__).with_name("senses.yaml")


@functools.cache
def lexicon() -> tuple[str, ...]:
    """Every phrase of the lexicon, once."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    data = yaml.load(LEXICON_FILE.read_text(encoding="utf-8"), Loader=loader) or {}
    return tuple(dict.fromkeys(str(p) for phrases in data.values() for p in phrases or ()))


@functools.cache
def _other_senses(match: tuple[str, ...], cues: tuple[str, ...], own: tuple[str, ...]) -> tuple[str, ...]:
    forms = (*match, *cues)
    found = [p for p in lexicon() if find_form(p, forms)] if forms else []
    return tuple(dict.fromkeys((*own, *found)))


def look_alikes_of(attribute: Attribute) -> tuple[str, ...]:
    """The attribute's own look-alike phrases and the lexicon's that hold one of its forms or cues."""
    return _other_senses(attribute.match, attribute.cues, attribute.look_alikes)
