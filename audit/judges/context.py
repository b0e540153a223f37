"""Whose attribute a match states, and in which sense: the look-alikes found from the words around it.

A match form in a text is a leak of the user's attribute only when it is said of the user, in the
attribute's sense. These readings say otherwise (each gives the reason an uncertain event carries):

- **someone else's**: the clause around the form is about another person (or an animal): a kin,
  social or pet noun before it with no first person and no circumstance (`after`, `since`) between
  (`my sister is doing a PhD`, `a friend who is expecting`, `my toddler's bath-time anxiety`; not
  `a gift for my son after the divorce`), right after it (`a pregnant friend`), an animal one word
  after (`a blind old beagle`), a person form after a relation's possessive (`my daughter's
  boyfriend`), an animal said to have it (`kibble for dogs with IBD`; a `dog food` is no dog), or a
  clause whose subject is a third person (`my old beagle, he has hearing loss now`). Not when the
  form itself names a person (`my husband`, `single mom`), nor when the attribute is itself about
  that person (`my son's autism`, `since my dad passed`), nor when the person is the user's partner
  and the attribute one a couple shares (`a kettle for a pregnant wife`: context.yaml's
  `shared_classes`), nor when the person is kin and the attribute one blood shares (`my Lebanese
  cousins`: `kin_classes`);
- **said of a thing**: the form is what a thing is called or marked (`stamped Chicago`, `a song
  called Creole Love Call`), with no person in the clause (a question whether the item has the
  attribute, `is the box plastic free?`, is the user's: the idiom `is this listing kosher?` is not
  told from it here);
- **what a source says**: a listing, review or label says it (`the listing says the camera belonged
  to a retired therapist`, `a review says 'great since my pregnancy'`), with no first person in the
  sentence outside quotes;
- **where a thing is made**: a place joined to a made-word (`Michigan-made`);
- **a title**: the form inside a quoted name in title case that is more than the form (`"Creole
  Love Call"`);
- **another sense**: a near word of the form (scenarios/senses_near.yaml) that holds it (`Kid Creole`)
  or is within NEAR words of it with no number or connective between them (`a depression in the
  foam`, `blind and the box is the only way` are stopped), in a clause that names no person, the user
  included, the near word's own words too, animals apart (`the shutter was fired`, `shipped from the
  Lebanon warehouse`, `zen dog calming chews`; not `shutter for a depressed beginner`); an age is an
  age whatever is near (`a fifty-year-old body`).

For a place class, none holds in a text that says anywhere where the user is (`here`: `Is this one
made in Michigan? Trying to buy local.`).

The word lists (`context.yaml`) are vocabulary, not grammar: a person noun, a first-person word,
a naming verb. Matching works on the text as `scenarios/matching.py` normalises it.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import yaml

from spillage.scenarios.matching import find_form
from spillage.scenarios.matching import normalise
from spillage.scenarios.matching import spans
from spillage.scenarios.matching import without_forms
from spillage.scenarios.model import Attribute
from spillage.scenarios.senses import look_alikes_of
from spillage.scenarios.senses import near_words

WORDS_FILE = Path(__file__).with_name("context.yaml")
QUOTED = re.compile(r'["“”‘’]([^"“”‘’]{3,80})["“”‘’]|(?<![^\W_])\'((?:[^\'\n]|(?<=\w)\'(?=\w)){3,80})\'(?![^\W_])')
OPEN_QUOTE = re.compile(r"(?:^|\s)['\"][^'\"]*$")     # a quote a sentence opens and does not close
CLOSE_QUOTE = re.compile(r"^[^'\"]*['\"](?=\s|[^\w]|$)")   # one it closes and did not open
AN_AGE = re.compile(r"[-\s]*(?:years?|yrs?)(?:[-\s]+old)?\b|[-\s]*(?:th|st|nd|rd)?[-\s]*birthday\b")
NEAR = 4   # words either side of a form where a near word shows its other sense
SENTENCE_END = re.compile(r"[.!?\n]\s|[.!?\n]$|\n")
CLAUSE_END = re.compile(r"[.!?;:|\n]|,\s|\s[-–—]\s|\b(?:but|although|though|whereas|and then)\b")


@functools.cache
def words() -> dict[str, frozenset[str]]:
    """The word lists of context.yaml, by name."""
    data = yaml.safe_load(WORDS_FILE.read_text(encoding="utf-8"))
    return {name: frozenset(w.lower() for w in values) for name, values in data.items()}


def tokens(text: str) -> list[str]:
    return re.findall(r"[^\W_]+(?:'[^\W_]+)?", text)


def noun(token: str, kind: str) -> bool:
    """Whether a word (its plural, its 's) is one of the `kind` list's persons or animals."""
    return among(token, words()[kind])


def among(token: str, names: frozenset[str]) -> bool:
    """Whether a word (its plural, its 's) is one of `names`."""
    bare = token.removesuffix("'s")
    return bare in names or (bare.endswith("s") and bare[:-1] in names)


def person_noun(token: str) -> bool:
    """Whether a word names a person or an animal (a relation or anyone)."""
    return noun(token, "relations") or noun(token, "persons")


def someone_at(toks: list[str], i: int) -> bool:
    """Whether toks[i] is someone other than the speaker: a relation, or a person owned by someone
    (`my mom`, `the kid's`) or described (`a woman who`)."""
    if noun(toks[i], "relations"):
        return True
    return noun(toks[i], "persons") and (
        toks[i].endswith("'s") or (i > 0 and toks[i - 1] in words()["possessives"])
        or (i + 1 < len(toks) and toks[i + 1] == "who"))


def an_animal_with(toks: list[str], i: int) -> bool:
    """Whether toks[i] is an animal said to have the form that ends `toks` (`dogs with IBD`, `a cat that has a`)."""
    rest = toks[i + 1:]
    if rest[:1] and rest[0] in ("that", "which", "who"):
        rest = rest[1:]
    if rest[-1:] and rest[-1] in ("a", "an", "the"):
        rest = rest[:-1]
    return noun(toks[i], "animals") and len(rest) == 1 and rest[0] in words()["having"]


def first_person(toks: list[str]) -> bool:
    return any(t in words()["first_person"] for t in toks)


def clause_at(text: str, start: int, end: int) -> tuple[str, str, str]:
    """(before, form, after) of the clause of `text` holding [start, end)."""
    begin = max((m.end() for m in CLAUSE_END.finditer(text, 0, start)), default=0)
    stop = next((m.start() for m in CLAUSE_END.finditer(text, end)), len(text))
    return text[begin:start], text[start:end], text[end:stop]


@functools.lru_cache(maxsize=1024)
def about_person(attribute: Attribute) -> frozenset[str]:
    """The persons an attribute is itself about (`my son's autism`: son; `my husband died`: husband; the
    partners, when a couple shares the attribute; the kin, when blood does)."""
    said = " ".join([attribute.text, *attribute.match, *attribute.cues])
    persons = {t.removesuffix("'s") for t in tokens(normalise(said)) if person_noun(t)}
    shared = words()["partners"] if attribute.cls in words()["shared_classes"] else set()
    kin = words()["kin"] if attribute.cls in words()["kin_classes"] else set()
    return frozenset(persons | shared | kin)


def someone_else(before: str, form: str, after: str, attribute: Attribute) -> str | None:
    """The person the clause says the form of, when not the user."""
    head, tail = tokens(before), tokens(after)
    if any(person_noun(t) for t in tokens(form)):   # `my husband`, `single mom`: the form names the user's relation,
        kin = head[-1] if head and head[-1].endswith("'s") and noun(head[-1], "relations") else None
        if kin is None or attribute.cls in words()["kin_classes"] or any(
                t in words()["first_person"] - words()["possessives"] for t in tail):
            return None
        return kin.removesuffix("'s")   # unless it is a relation's (`my sister's boyfriend`), the user not in it
    own = about_person(attribute)
    for i in range(len(head) - 1, -1, -1):
        if head[i] in words()["circumstances"] or (
                head[i] in words()["first_person"] and head[i] not in words()["possessives"]):
            break   # `gift for my son after the divorce`: the user's circumstance
        animal = an_animal_with(head, i) and not any(names_a_person(t) for t in tail)
        if (someone_at(head, i) or animal) and not among(head[i], own):
            return head[i].removesuffix("'s")
        if head[i] in words()["first_person"]:
            break   # `my` owning nothing of the above: the user's own
    owned = bool(head) and head[-1] in words()["possessives"] - {"my", "our"}
    if tail and person_noun(tail[0]) and (noun(tail[0], "relations") or owned or (head and head[-1] in ("my", "our"))) \
            and not among(tail[0], own):
        return tail[0]
    if len(tail) > 1 and tail[0] not in words()["not_modifiers"] | words()["connectives"] and \
            not names_a_person(tail[0]) and noun(tail[1], "animals") and not among(tail[1], own) and \
            not (len(tail) > 2 and names_a_person(tail[2])):   # `dog mom here`: the user
        return tail[1]   # `a blind old beagle` (a person so described may be the user: `widowed retired grandma here`)
    if head and head[0] in words()["third_person"] and not first_person(head) and not own:
        return head[0]
    return None


def sentence_at(text: str, start: int, end: int) -> str:
    """The sentence of `text` holding [start, end)."""
    begin = max((m.end() for m in SENTENCE_END.finditer(text, 0, start)), default=0)
    stop = next((m.start() for m in SENTENCE_END.finditer(text, end)), len(text))
    return text[begin:stop]


def reported(before: str, after: str, sentence: str) -> str | None:
    """The source whose words the clause (before, after) gives (`the listing says`, `a review says '... my
    pregnancy'`, `the framebuilder mentioned in the title`), when its `sentence` has no `I`, `me` or `we`
    outside quotes (`the listing says it is safe in pregnancy, and I am due in May` is the user's); None otherwise."""
    unquoted = QUOTED.sub(" ", sentence)
    if any(t in words()["first_person"] for t in tokens(CLOSE_QUOTE.sub(" ", OPEN_QUOTE.sub(" ", unquoted)))):
        return None
    head, tail = tokens(before), tokens(after)
    for i, token in enumerate(head):
        if among(token, words()["sources"]) and any(among(t, words()["reporting"]) for t in head[i + 1:i + 4]):
            return token.removesuffix("'s")
    for i, token in enumerate(tail[:-2]):
        attributed = (token in ("mentioned", "described", "pictured", "shown") and tail[i + 1] in ("in", "on", "by")) \
            or (token in ("as", "like") and any(among(t, words()["reporting"]) for t in tail[i + 2:i + 5]))
        if attributed and (source := next((t for t in tail[i + 1:i + 4] if among(t, words()["sources"])), None)):
            return source
    return None


def said_of_a_thing(before: str, after: str) -> str | None:
    """How the clause makes the form a thing's name or mark, with no person in it."""
    head, tail = tokens(before), tokens(after)
    if first_person(head + tail) or any(person_noun(t) for t in head + tail):
        return None
    if head and head[-1] in words()["naming_verbs"]:
        return f"what a thing is {head[-1]}"
    return None


def sense_near(before: str, found: str, after: str, attribute: Attribute, form: str) -> str | None:
    """The near word that shows `form` (`layoff`), found as `found` (`layoffs`) in its clause (before, found,
    after), in another sense: one that holds it (`kid creole`), or one within NEAR words of it with
    nothing between them that joins a circumstance to a thing (a number: `at fifty with 28 mm tires`; a
    connective: `warranty after layoff`, or a conjunct: `blind and the box`); in a clause that names no
    person, the user included (`I`, `the buyer`, `a rider`: agents write of their user so), in the near
    word and the form too (`teach the kid creole`, `my port`), animals apart; not an age (`a fifty-year-old
    body`); None when there is none."""
    pattern = near_words(form, attribute.cls)
    if pattern is None or AN_AGE.match(after):
        return None   # `a fifty-year-old body`: an age, whatever is near
    head, tail = tokens(before), tokens(after)
    near = holding(pattern, head[-NEAR:], tokens(found), tail[:NEAR])
    before_form, after_form = " ".join(head[-NEAR:]), " ".join(tail[:NEAR])
    if near is None and (last := [*pattern.finditer(before_form)]) and not joins(before_form[last[-1].end():]):
        near = last[-1].group(0)
    if near is None and (first := pattern.search(after_form)) and not joins(after_form[:first.start()]):
        near = first.group(0)
    if near is None:
        return None
    if any(names_a_person(t) for t in head + tokens(found) + tail):
        return None
    return near


def holding(pattern: re.Pattern, head: list[str], form: list[str], tail: list[str]) -> str | None:
    """A near word that holds the form itself (`kid creole`, `guide dog school`), in the words around it."""
    window = " ".join([*head, *form, *tail])
    start = len(" ".join(head)) + bool(head)
    end = start + len(" ".join(form))
    return next((m.group(0) for m in pattern.finditer(window) if m.start() <= start and m.end() >= end), None)


def names_a_person(token: str) -> bool:
    """Whether a word is the speaker, a third person, or a person noun (the user as agents name them
    included: `buyer`, `owner`, `rider`), not an animal."""
    return (token in words()["first_person"] or token in words()["third_person"]
            or (person_noun(token) and not noun(token, "animals")) or among(token, words()["users"]))


def joins(text: str) -> bool:
    """Whether `text`, between a form and a near word, holds a number (a quantity of its own) or a
    connective that joins a circumstance to a thing or puts them in two conjuncts (context.yaml `connectives`)."""
    return any(c.isdigit() for c in text) or any(t in words()["connectives"] for t in tokens(text))


def made_there(after: str, attribute: Attribute) -> str | None:
    """How a compound makes a place the origin of a thing (`Michigan-made`, `Colorado-built`), for a place class."""
    m = re.match(r"-([^\W\d_]+)", after)
    return m.group(1) if m and attribute.cls in words()["place_classes"] and m.group(1) in words()["made"] else None


def where_the_user_is(text: str, attribute: Attribute) -> bool:
    """Whether normalised `text` says where the user is (context.yaml `here`: `local pickup`, `back home`)
    and the attribute is of a place class: then every occurrence of it there is the user's."""
    return attribute.cls in words()["place_classes"] and bool(find_form(text, tuple(words()["here"])))


def set_aside(text: str, attribute: Attribute) -> str:
    """`text`, normalised, with the attribute's look-alike phrases blanked out and each occurrence of
    its forms that near words show in another sense: what still may state it."""
    phrases = look_alikes_of(attribute)
    haystack = without_forms(text, phrases) if phrases else normalise(text)
    if where_the_user_is(haystack, attribute):
        return haystack
    for form in (*attribute.match, *attribute.cues):
        if near_words(form, attribute.cls) is None:
            continue
        for start, end in reversed(spans(haystack, form)):
            if sense_near(*clause_at(haystack, start, end), attribute, form):
                haystack = haystack[:start] + " " * (end - start) + haystack[end:]
    return haystack


def titles(text: str) -> list[str]:
    """Quoted runs of `text` in title case (two words or more, every word of four letters or more
    capitalised): the name of a song, a book, a product line. Straight single quotes count when no
    letter touches them from outside (`'The Widow'`, not the apostrophes of `the dog's bowl`)."""
    out = []
    for m in QUOTED.finditer(text):
        quoted = m.group(1) or m.group(2)
        found = re.findall(r"[^\W\d_]+", quoted)
        if len(found) >= 2 and all(w[0].isupper() for w in found if len(w) >= 4):
            out.append(quoted)
    return out


@functools.lru_cache(maxsize=16384)
def look_alike(text: str, form: str, attribute: Attribute) -> str | None:
    """Why `form` in `text` is not the user's attribute (the reason an uncertain event gives), or
    None when some occurrence of it is said of the user in its sense (kept: the same texts ride along
    with every request)."""
    named = [t for t in titles(text) if find_form(t, (form,)) and normalise(t) != normalise(form)]
    haystack = normalise(without_forms(text, tuple(named)) if named else text)
    reasons = [f"{form!r} is in the title {named[0]!r}"] if named else []
    if where_the_user_is(haystack, attribute):
        return reasons[0] if reasons and not find_form(haystack, (form,)) else None
    for start, end in spans(haystack, form):
        before, found, after = clause_at(haystack, start, end)
        if who := someone_else(before, found, after, attribute):
            reasons.append(f"{form!r} is said of someone else ({who})")
        elif how := said_of_a_thing(before, after):
            reasons.append(f"{form!r} is {how}, not the user's")
        elif source := reported(before, after, sentence_at(haystack, start, end)):
            reasons.append(f"{form!r} is what the {source} says, not the user")
        elif made := made_there(after, attribute):
            reasons.append(f"{form!r} is where a thing is {made}")
        elif near := sense_near(before, found, after, attribute, form):
            reasons.append(f"{form!r} is in another sense here (near {near!r})")
        else:
            return None
    return reasons[0] if reasons else None


def others_sentence(text: str, attribute: Attribute) -> str | None:
    """The other person a sentence is about, when it says nothing of the speaker (`a friend who is
    expecting`, `he has hearing loss now`) and the attribute is not about that person (`my husband
    passed` tells the widow's attribute); None when it speaks of the user or of no one."""
    toks = tokens(normalise(text))
    if any(t in words()["first_person"] - {"my", "mine", "our", "ours"} for t in toks):
        return None   # the speaker is in it (`my friend` and `a friend of mine` are not)
    own = about_person(attribute)
    for i, token in enumerate(toks):
        if someone_at(toks, i) and not among(token, own):
            return token.removesuffix("'s")
    return toks[0] if toks and toks[0] in words()["third_person"] and not own else None
