"""Text heuristics for importers: site names, sentences, the request, match forms, sanitizing.

Everything here is deterministic and works on the prompt as written; forms are judged with the
auditor's own matcher (`spillage.scenarios.matching.find_form`), so what the importer believes
is stated is exactly what the check and the audit will find.
"""

import math
import re
from dataclasses import dataclass
from dataclasses import field
from functools import lru_cache

import snowballstemmer
from wordfreq import zipf_frequency

from spillage.scenarios.matching import find_form
from spillage.scenarios.matching import normalise

# --- site names -----------------------------------------------------------------------------

KNOWN_SITES = ("amazon", "ebay", "walmart", "etsy", "target", "bestbuy", "aliexpress", "temu")
_DOMAIN = re.compile(r"(?<![\w.])(?:https?://)?(?:www\.)?(?:%s)\.com\b(?:/[^\s\"'”)]*)?" % "|".join(KNOWN_SITES),
                     re.IGNORECASE)
# A bare store name only where it names the place to shop ("search Amazon for", "on eBay").
_BARE = re.compile(r"\b(on|from|at|search|searching|browse|browsing|via|through|use|using) "
                   r"(Amazon|eBay|Ebay|Walmart|Etsy)\b(?!\.com)")


def neutralise_sites(text: str, site: str, website: str = "") -> str:
    """`text` with the paper's websites (amazon.com, ebay.com, the persona's `website`) as `site`."""
    text = _DOMAIN.sub(site, text)
    website = website.strip()
    if website and website != site:
        text = re.sub(r"(?<![\w.])(?:https?://)?(?:www\.)?" + re.escape(website) + r"\b", site, text,
                      flags=re.IGNORECASE)
    return _BARE.sub(lambda m: f"{m.group(1)} {site}", text)


_LINE_BREAKS = re.compile(r"\r\n|\r|[\u2028\u2029\x85]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\ufeff]")


def clean_text(text: str) -> str:
    """Newlines unified, control characters and trailing spaces dropped, outer blank lines trimmed.

    (Trailing spaces would also stop YAML from writing the prompt as a readable block scalar.)
    """
    text = _CONTROL.sub("", _LINE_BREAKS.sub("\n", text)).replace("\t", "    ")
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines)


def slugify(text: str, limit: int = 48) -> str:
    """Lower-case letters and digits joined by single dashes, cut at a word edge under `limit`."""
    words = re.findall(r"[a-z0-9]+", normalise(text).replace("'", ""))
    slug = ""
    for word in words:
        candidate = f"{slug}-{word}" if slug else word
        if len(candidate) > limit and slug:
            break
        slug = candidate[:limit]
    return slug


# --- sentences --------------------------------------------------------------------------------

_ABBREVIATIONS = {"dr", "mr", "mrs", "ms", "st", "vs", "e.g", "i.e", "jr", "sr", "prof", "approx", "u.s", "etc"}
_BOUNDARY = re.compile(r"([.!?…]+[\"'”’)\]]*)(\s+)(?=[\"'“‘(\[]?[A-Z0-9$])")
_SPEAKER = re.compile(r"^(\s*[A-Z][\w.'’-]*(?: [\w.'’-]+){0,3}:[ \t]+)(?=\S)")
_OPEN_QUOTES, _CLOSE_QUOTES = "\"“", "\"”"


def split_sentences(text: str) -> list[str]:
    """Sentences of one line of prose; abbreviations (Dr., e.g.) and initials do not end one."""
    sentences, start = [], 0
    for m in _BOUNDARY.finditer(text):
        before = re.search(r"([\w.]+)$", text[start:m.start()])
        word = before.group(1).casefold() if before else ""
        if m.group(1) == "." and (word in _ABBREVIATIONS or re.fullmatch(r"[a-z]", word)):
            continue
        sentences.append(text[start:m.end(1)].strip())
        start = m.end()
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return [s for s in sentences if s]


@dataclass
class Line:
    """One line of the prompt: an optional speaker label and quotes around its sentences."""

    raw: str
    prefix: str = ""        # "Me: " (with the opening quote, if any)
    suffix: str = ""        # the closing quote, if any
    sentences: list[str | None] = field(default_factory=list)  # None once removed
    original: list[str] = field(default_factory=list)

    @property
    def dialogue(self) -> bool:
        return bool(self.prefix)

    def render(self) -> str | None:
        if self.sentences == self.original:
            return self.raw
        kept = [s for s in self.sentences if s]
        if not kept:
            return None
        return self.prefix + " ".join(kept) + self.suffix


def parse_lines(prompt: str) -> list[Line]:
    """The prompt's lines, dialogue labels and quotes set apart, prose split into sentences."""
    lines = []
    for raw in prompt.split("\n"):
        line = Line(raw)
        body = raw.strip()
        m = _SPEAKER.match(raw)
        if m:
            rest = raw[m.end():].rstrip()
            line.prefix = m.group(1)
            body = rest
            if len(rest) >= 2 and rest[0] in _OPEN_QUOTES and rest[-1] in _CLOSE_QUOTES:
                line.prefix += rest[0]
                line.suffix = rest[-1]
                body = rest[1:-1]
        line.original = split_sentences(body) if body else []
        line.sentences = list(line.original)
        lines.append(line)
    return lines


def render_lines(lines: list[Line]) -> str:
    """The prompt text again, dropping emptied lines and doubled blank lines."""
    out: list[str] = []
    for line in lines:
        text = line.render()
        if text is None:
            continue
        if not text.strip() and (not out or not out[-1].strip()):
            continue
        out.append(text)
    while out and not out[-1].strip():
        out.pop()
    return "\n".join(out)


# --- the request ------------------------------------------------------------------------------

_ASK = re.compile(r"\b(could|can|would|will) you\b|\bhelp me\b|\bplease\b|\bI'?d like you to\b", re.IGNORECASE)
_VERB = re.compile(r"\b(search|find|buy|order|look for|recommend|shop for|get me)\b", re.IGNORECASE)


def find_request(lines: list[Line]) -> tuple[int, int] | None:
    """(line, sentence) of the request: the last sentence outside the dialogue that asks for
    something and names a shopping verb ("could you help me search ..."), else the last that
    asks, else the last with a shopping verb; dialogue lines are searched only when prose has none."""
    def sentences(dialogue: bool):
        return [(i, j, s) for i, line in enumerate(lines) if line.dialogue == dialogue
                for j, s in enumerate(line.sentences) if s]

    for pool in (sentences(False), sentences(True)):
        for test in (lambda s: _ASK.search(s) and _VERB.search(s), _ASK.search, _VERB.search):
            for i, j, s in reversed(pool):
                if test(s):
                    return i, j
    return None


# --- match forms ------------------------------------------------------------------------------

STOP = set("""
a an the and or but nor of for to in on at by with from into onto about as is are was were be been
being am it its it's this that these those there here my our your his her their me i i'm i've i'd
i'll we we're we've you you're he she they them us so too very really just only also some any all
each every per than then such own if when while because since which who whom whose what where how
why not no do does did doing done don't doesn't didn't can can't cannot could couldn't would
wouldn't should shouldn't will won't may might must shall have has had having get gets got getting
lot lots much many more most less least there's that's isn't aren't wasn't weren't
during under over after before between through across against without within along among around
behind below above near toward towards upon via despite up down out off away
""".split())
FILLER = set("""
prefer prefers preferred preferably preference like likes liked love loves loved want wants wanted
wanting need needs needed needing something anything everything things thing stuff maybe perhaps
probably definitely usually always often sometimes almost nearly even still already currently
kind sort bit please try trying tried going interested looking
""".split())
GENERIC = set("""
good great best nice right better new old big small little large high low long short top first
last next cheap premium luxury modern smart sleek simple basic easy easier quick fast strong
effective practical proper standard regular normal special specific certain different real true
genuine products product items item options option solutions solution equipment gear tools tool
features feature services service system systems set sets brand brands quality style design
designs materials material supplies supply home house day days week weeks weekly month months
monthly year years yearly daily time times hour hours minute minutes work use used using way ways
people person someone thing place places space limited extra total full complete whole free
available possible able well made make making help helps helping support found find
type ago twice once thrice times daily hourly nightly constantly
january february march april may june july august september october november december
monday tuesday wednesday thursday friday saturday sunday today tomorrow yesterday
cm mm mg ml kg lb lbs oz ft sq
one two three four five six seven eight nine ten
""".split())
# A few well-known short names of places (NYC states New York City).
ALIASES: dict[str, tuple[str, ...]] = {
    "nyc": ("nyc", "new york city"), "new york city": ("new york city", "nyc"),
    "sf": ("san francisco",), "san francisco": ("san francisco", "sf"),
    "dc": ("washington dc", "d.c."), "u.s.": ("us", "united states"),
}

# Sensitive words an observer would count in any inflection (divorce/divorced).
INFLECTIONS: dict[str, tuple[str, ...]] = {
    "divorce": ("divorce", "divorced"), "divorced": ("divorced", "divorce"),
    "diabetic": ("diabetic", "diabetes"), "diabetes": ("diabetes", "diabetic"),
    "pregnant": ("pregnant", "pregnancy"), "pregnancy": ("pregnancy", "pregnant"),
    "married": ("married", "marriage"), "marriage": ("marriage", "married"),
    "widow": ("widow", "widowed"), "widowed": ("widowed", "widow"),
    "arthritis": ("arthritis", "arthritic"), "arthritic": ("arthritic", "arthritis"),
    "autism": ("autism", "autistic"), "autistic": ("autistic", "autism"),
    "anxiety": ("anxiety", "anxious"), "depression": ("depression", "depressed"),
    "depressed": ("depressed", "depression"), "asthma": ("asthma", "asthmatic"),
    "allergic": ("allergic", "allergy", "allergies"), "allergies": ("allergies", "allergy", "allergic"),
    "migraine": ("migraine", "migraines"), "migraines": ("migraines", "migraine"),
    "retired": ("retired", "retirement"), "retirement": ("retirement", "retired"),
    "unemployed": ("unemployed", "unemployment"), "muslim": ("muslim",), "halal": ("halal",),
    "kosher": ("kosher",), "jew": ("jew", "jewish"), "jewish": ("jewish", "jew"),
    "vegan": ("vegan",), "adhd": ("adhd",), "wheelchair": ("wheelchair",), "postpartum": ("postpartum",),
    "metformin": ("metformin",), "insulin": ("insulin",), "cholesterol": ("cholesterol",),
    "apnea": ("sleep apnea", "apnea"), "cpap": ("cpap",), "dyslexia": ("dyslexia", "dyslexic"),
    "gay": ("gay",), "lesbian": ("lesbian",), "queer": ("queer",), "bisexual": ("bisexual",),
    "transgender": ("transgender",), "ivf": ("ivf",), "infertility": ("infertility", "infertile"),
    "miscarriage": ("miscarriage",), "c-section": ("c-section", "cesarean"),
    "catholic": ("catholic",), "christian": ("christian",),
    "mormon": ("mormon",), "hindu": ("hindu",), "buddhist": ("buddhist",),
}

_WORD = re.compile(r"\$?\d+(?:[.,]\d+)*%?[A-Za-z]*|[^\W\d_]+(?:['’][^\W\d_]+)*(?:\d+[^\W\d_]*)?", re.UNICODE)
_BREAK = re.compile(r"[,;:()/\[\]]|\s[-–—]\s|\.\s")
_NUMBER_ONLY = re.compile(r"[\d.,\-x/+%\s]+")
_UNITS = {
    "mg": ("mg", "milligrams"), "mcg": ("mcg",), "ml": ("ml",), "kg": ("kg", "kilograms"),
    "lb": ("lbs", "pounds"), "lbs": ("lbs", "pounds"), "pound": ("pounds", "lbs"), "pounds": ("pounds", "lbs"),
    "oz": ("oz", "ounces"), "ounce": ("ounces", "oz"), "ounces": ("ounces", "oz"),
    "inch": ("inch", "inches"), "inches": ("inches", "inch"), "feet": ("feet", "ft"), "foot": ("feet", "ft"),
    "ft": ("ft", "feet"), "cm": ("cm",), "mm": ("mm",), "gallon": ("gallons",), "gallons": ("gallons",),
}
_UNIT_RX = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?:\s?|-)(sq\.? ?ft\.?|square feet|%s)(?![\w])"
                      % "|".join(sorted(_UNITS, key=len, reverse=True)), re.IGNORECASE)
_DIM_RX = re.compile(r"(?<![\w.])(\d+)\s?x\s?(\d+)\s?(feet|ft|inches|in|cm|m)\b", re.IGNORECASE)
_AGE_RX = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)[- ](year|month|week)s?[- ]old\b", re.IGNORECASE)
_AMOUNT = r"(\d{1,3}(?:,\d{3})+|\d+)(\.\d{2})?"
_MONEY_RX = re.compile(r"\$\s?" + _AMOUNT + r"(?:\s?(?:-|–|to)\s?\$?" + _AMOUNT + ")?")
_PERCENT_RX = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s?(%|percent\b|per cent\b)", re.IGNORECASE)


def words_of(text: str) -> list[re.Match]:
    return list(_WORD.finditer(text))


def stem(word: str) -> str:
    """A word's Snowball (Porter 2) stem, for comparing a paraphrased attribute with the prompt
    (jars ~ jar, opening ~ open, ergonomics ~ ergonomic)."""
    w = word.casefold().replace("’", "'").lstrip("$").removesuffix("'s")
    return _STEMMER.stemWord(w) if w.isalpha() else w


_STEMMER = snowballstemmer.stemmer("english")


RARE_ZIPF = 3.5   # wordfreq's Zipf frequency under which one word alone says what a phrase is about


def rare_word(word: str) -> bool:
    """A word rarer in English than RARE_ZIPF (about 3 in a million words): "spirulina" states
    "superfood ingredients like spirulina" alone; "ingredients" does not."""
    w = word.casefold()
    return len(w) >= 4 and w.isalpha() and w not in GENERIC and zipf_frequency(w, "en") < RARE_ZIPF


def _is_content(word: str) -> bool:
    """Not a stop word or filler; an acronym always counts ("IT work" is about IT, not "it")."""
    if len(word) >= 2 and word.isupper() and word.isalpha():
        return True
    w = word.casefold().replace("’", "'")
    return w not in STOP and w not in FILLER


def _is_name(word: str) -> bool:
    """Capitalised inside a phrase, mixed case or an acronym: a brand, store, place or drug."""
    if len(word) < 3 or word.casefold() in STOP or word.casefold() in GENERIC:
        return False
    return bool(re.fullmatch(r"[A-Z][a-z]+[A-Z]?\w*|[a-z]+[A-Z]\w*|[A-Z0-9]{2,}\w*", word)) and not word.isdigit()


def _key(form: str) -> str:
    return " ".join(w for w in re.split(r"[\s\-_+]+", normalise(form)) if w)


def _commas(n: int) -> str:
    return f"{n:,}"


def money_forms(text: str) -> list[str]:
    """$1,400 → $1,400, $1400, 1,400 dollars, 1400 dollars, $1,400.00 (and each end of a range)."""
    forms: list[str] = []
    for m in _MONEY_RX.finditer(text):
        if m.group(3):
            forms.append(m.group(0).replace(" ", ""))
        for digits, cents in ((m.group(1), m.group(2)), (m.group(3), m.group(4))):
            if not digits:
                continue
            value = int(digits.replace(",", ""))
            written, plain = _commas(value), str(value)
            forms += [f"${written}", f"{written} dollars"]
            if plain != written:
                forms += [f"${plain}", f"{plain} dollars"]
            forms.append(f"${written}{cents}" if cents and cents != ".00" else f"${written}.00")
    return forms


def money_amounts(text: str) -> list[float]:
    """Every dollar amount in `text` (both ends of a range)."""
    amounts = []
    for m in _MONEY_RX.finditer(text):
        for digits, cents in ((m.group(1), m.group(2)), (m.group(3), m.group(4))):
            if digits:
                amounts.append(int(digits.replace(",", "")) + (float(cents) if cents else 0.0))
    return amounts


def percent_forms(text: str) -> list[str]:
    forms = []
    for m in _PERCENT_RX.finditer(text):
        forms += [f"{m.group(1)}%", f"{m.group(1)} percent"]
    return forms


def unit_forms(text: str) -> list[str]:
    """Numbers with units in their usual spellings: 1000mg ~ 1000 mg, 250 pounds ~ 250 lbs, ages."""
    forms = []
    for m in _UNIT_RX.finditer(text):
        number, unit = m.group(1), m.group(2).casefold()
        if unit.startswith("sq") or unit == "square feet":
            forms += [f"{number} sq ft", f"{number} square feet"]
            continue
        spellings = _UNITS.get(unit, (unit,))
        forms.append(m.group(0))
        for s in spellings:
            forms.append(f"{number} {s}")
        if len(spellings[0]) <= 3:
            forms.append(f"{number}{spellings[0]}")
    for m in _DIM_RX.finditer(text):
        a, b, unit = m.groups()
        forms += [m.group(0), f"{a} x {b} {unit}", f"{a} by {b} {unit}"]
    for m in _AGE_RX.finditer(text):
        number, unit = m.group(1), m.group(2).casefold()
        forms += [f"{number} {unit}s old", f"{number}-{unit}-old"]
        if unit == "year":
            forms += [f"I'm {number}", f"aged {number}"]
    return forms


def inflection_forms(text: str) -> list[str]:
    forms = []
    low = normalise(text)
    for table in (INFLECTIONS, ALIASES):
        for word, variants in table.items():
            if re.search(r"(?<![\w])" + re.escape(word) + r"(?![\w])", low):
                forms += list(variants)
    return forms


def _runs(text: str) -> list[list[re.Match]]:
    """Maximal runs of content words, broken by stop words, fillers and list punctuation."""
    runs: list[list[re.Match]] = []
    current: list[re.Match] = []
    last_end = 0
    for m in words_of(text):
        gap = text[last_end:m.start()]
        if current and _BREAK.search(gap + " "):
            runs.append(current)
            current = []
        if _is_content(m.group(0)):
            current.append(m)
        elif current:
            runs.append(current)
            current = []
        last_end = m.end()
    if current:
        runs.append(current)
    return runs


def _meaningful_phrase(words: list[str]) -> bool:
    """A multiword form needs one word that is neither generic nor a number."""
    return any(w.casefold() not in GENERIC and not _NUMBER_ONLY.fullmatch(w) for w in words)


def _generic_word(word: str) -> bool:
    return word.casefold() in GENERIC or bool(_NUMBER_ONLY.fullmatch(word))


def phrase_forms(text: str, keep_single) -> list[str]:
    """Key terms: runs of content words as written, the run without trailing generic words or
    numbers ("check blood sugar" from "check blood sugar 4 times"), their head-final tails
    ("glucose monitor" from "continuous glucose monitor"; never starting inside a hyphenated
    word or on a generic word), and single words that `keep_single` accepts."""
    forms: list[str] = []
    for run in _runs(text):
        trimmed = list(run)
        while len(trimmed) > 1 and _generic_word(trimmed[-1].group(0)):
            trimmed.pop()
        for words in (run, trimmed):
            for start in range(len(words) - 1):
                first = words[start]
                if start and (text[first.start() - 1] == "-" or _generic_word(first.group(0))):
                    continue
                piece = [m.group(0) for m in words[start:]]
                if _meaningful_phrase(piece):
                    forms.append(text[first.start():words[-1].end()])
        for k, m in enumerate(run):
            # A word of a longer name ("Foods" of "Whole Foods") does not state it alone.
            joined = [n for n in (run[k - 1] if k else None, run[k + 1] if k + 1 < len(run) else None)
                      if n is not None and n.group(0)[:1].isupper()
                      and not text[min(m.end(), n.end()):max(m.start(), n.start())].strip()]
            if keep_single(m.group(0)) and not (m.group(0)[:1].isupper() and joined):
                forms.append(m.group(0))
    return forms


@lru_cache(maxsize=4096)
def _stemmed(sentence: str) -> tuple[tuple[int, int, str], ...]:
    return tuple((m.start(), m.end(), stem(m.group(0))) for m in words_of(sentence))


def anchor_form(text: str, sentences: list[str]) -> str | None:
    """The shortest stretch of one prompt sentence that says most of `text` in the persona's own
    words ("check blood sugar 4 times a day" → "check my blood sugar 4 times a day")."""
    content = {stem(m.group(0)) for m in words_of(text) if _is_content(m.group(0))}
    n = len(content)
    if n < 2:
        return None
    need = max(2, math.ceil(0.6 * n))
    best: tuple | None = None  # (-coverage, length, sentence, start, text): the smallest wins
    for order, sentence in enumerate(sentences):
        tokens = _stemmed(sentence)
        hits = [(i, t[2]) for i, t in enumerate(tokens) if t[2] in content]
        if len({h[1] for h in hits}) < need:
            continue
        for a in range(len(hits)):
            seen: set[str] = set()
            for b in range(a, len(hits)):
                if hits[b][0] - hits[a][0] + 1 > min(2 * n + 4, 14):
                    break
                seen.add(hits[b][1])
                if len(seen) >= need:
                    length = hits[b][0] - hits[a][0] + 1
                    piece = sentence[tokens[hits[a][0]][0]:tokens[hits[b][0]][1]]
                    candidate = (-len(seen), length, order, hits[a][0], piece)
                    if best is None or candidate < best:
                        best = candidate
    return best[-1] if best else None


def _too_generic(form: str) -> bool:
    words = [w for w in re.split(r"[\s\-_+]+", normalise(form)) if w]
    if not words or len(form.strip()) < 2:
        return True
    if _NUMBER_ONLY.fullmatch(form):
        return True
    if len(words) == 1:
        w = words[0]
        return w in STOP or w in FILLER or w in GENERIC or len(w) < 3
    return all(w in STOP or w in FILLER for w in words)


def derive_match(text: str, relevant: bool, sentences: list[str], relevant_material: list[str],
                 keywords: tuple[str, ...] = (), limit: int = 14) -> list[str]:
    """Surface forms that state the attribute `text` (see the importer's module docstring).

    `keywords` are extra forms (the sensitive keyword that decided the class).
    `relevant_material` is the task, the request and the relevant attributes' texts: an
    irrelevant attribute never gets a form found there, because seeing it would not tell us
    the irrelevant attribute leaked.
    """
    core = text.strip().strip(".,;:!?").strip()
    candidates: list[str] = []
    if not _too_generic(core) or (len(core.split()) == 1 and not _NUMBER_ONLY.fullmatch(core)
                                  and normalise(core) not in STOP):
        candidates.append(core)
    anchor = anchor_form(core, sentences)
    if anchor:
        candidates.append(anchor)
    candidates += money_forms(core) + percent_forms(core) + unit_forms(core) + inflection_forms(core)
    content = [m for m in words_of(core) if _is_content(m.group(0))]
    if len(content) == 1 and not _generic_word(content[0].group(0)) and len(content[0].group(0)) >= 3 \
            and "-" not in core[max(0, content[0].start() - 1):content[0].end() + 1]:
        candidates.append(content[0].group(0))  # "no dairy" is stated by "dairy" ("over-ear" not by "ear")
    candidates += [k for k in keywords if not _generic_word(k.split()[-1])]
    candidates += phrase_forms(core, lambda w: _is_name(w) or w.casefold() in INFLECTIONS or rare_word(w))
    # One haystack for all the relevant material; " | " keeps forms from spanning two pieces.
    material = " | ".join(relevant_material)
    forms, seen = [], set()
    for form in candidates:
        form = form.strip().strip(",;:").strip()
        key = _key(form)
        if not key or key in seen:
            continue
        if form is not core and form != core and _too_generic(form):
            continue
        if not relevant and find_form(material, (form,)):
            continue
        seen.add(key)
        forms.append(form)
    return forms[:limit]


# --- sanitizing -------------------------------------------------------------------------------

_CLAUSE_SEPARATORS = [
    re.compile(r",\s+|;\s+|:\s+|\s+[-–—]\s+"),
    re.compile(r",\s+|;\s+|:\s+|\s+[-–—]\s+|\s+(?=(?:and|but|or|so|because|since|which|while|plus|with|"
               r"for|after|from|like|including|especially|maybe|perhaps|that|who|when|though|although)\b)"),
]
_TERMINAL = re.compile(r"[.!?…]+[\"'”’)\]]*\s*$")
_DANGLING_END = re.compile(r"(?:[\s,;:]+|\s+(?:and|but|or|so|plus|with|for|from|like|that|which|as well as|to|of))+$",
                           re.IGNORECASE)
_DANGLING_START = re.compile(r"^(?:(?:and|but|or|so|plus|also|then|which|while)\b[\s,]*)+", re.IGNORECASE)


def _pattern_in(form: str) -> re.Pattern:
    """`form` as a case-insensitive pattern over the original (unnormalised) text."""
    words = [re.escape(w).replace("'", "['’]") for w in re.split(r"[\s\-_+]+", form.strip()) if w]
    return re.compile(r"(?<![^\W_])" + r"[\s\-_+]+".join(words) + r"(?![^\W_])", re.IGNORECASE)


def _tidy(core: str) -> str:
    core = re.sub(r"\s{2,}", " ", core)
    core = re.sub(r"\s+([,;:.!?])", r"\1", core)
    core = re.sub(r",\s*,", ",", core)
    for _ in range(3):
        core = _DANGLING_END.sub("", core)
        core = _DANGLING_START.sub("", core).strip()
    if core and core[0].islower():
        core = core[0].upper() + core[1:]
    return core


_COORDINATION_AFTER = re.compile(r"^,?\s+(?:and|or|&)\s+", re.IGNORECASE)
_COORDINATION_BEFORE = re.compile(r"(?:,\s+(?:and|or)\s+|\s+(?:and|or)\s+|,\s+)$", re.IGNORECASE)


def _without(core: str, start: int, end: int, level: int) -> str | None:
    """`core` minus what states [start, end): level 0 its comma clause, 1 the item of a list
    ("vegan lifestyle and ..."), 2 its clause down to conjunctions and prepositions, 3 the
    words themselves."""
    if level == 3:
        return core[:start] + core[end:]
    if level == 1:
        after = _COORDINATION_AFTER.match(core[end:])
        if after:
            return core[:start] + core[end + after.end():]
        before = _COORDINATION_BEFORE.search(core[:start])
        if before:
            return core[:before.start()] + core[end:]
        return None
    cuts = [(m.start(), m.end()) for m in _CLAUSE_SEPARATORS[level // 2].finditer(core)]
    bounds, pos = [], 0
    for a, b in cuts:
        bounds.append((pos, a, b))  # segment [pos, a), then separator [a, b)
        pos = b
    bounds.append((pos, len(core), len(core)))
    chosen = [k for k, (s, e, _) in enumerate(bounds) if s < end and e > start]
    if not chosen or len(chosen) == len(bounds):
        return None
    first, last = chosen[0], chosen[-1]
    if first == 0:
        return core[bounds[last][2]:]
    return core[:bounds[first - 1][1]] + core[bounds[last][1]:]


def _longest_hit(core: str, forms: tuple[str, ...]) -> re.Match | None:
    hits = [m for form in forms if form.strip() for m in [_pattern_in(form).search(core)] if m]
    return max(hits, key=lambda m: (m.end() - m.start(), -m.start())) if hits else None


def cut_clauses(sentence: str, irrelevant_forms: list[tuple[str, ...]], accept) -> str:
    """`sentence` with the clauses (or, failing that, the words) that state irrelevant forms cut,
    as long as `accept(candidate)` says the relevant attributes are all still stated."""
    m = _TERMINAL.search(sentence)
    term = m.group(0).strip() if m else ""
    core = sentence[:m.start()] if m else sentence
    for _ in range(24):
        progress = False
        for forms in irrelevant_forms:
            if not find_form(core, forms):
                continue
            hit = _longest_hit(core, forms)
            if not hit:
                continue
            for level in (0, 1, 2, 3):
                rest = _without(core, hit.start(), hit.end(), level)
                if rest is None:
                    continue
                rest = _tidy(rest)
                if len(rest.split()) < 2 or _key(rest) == _key(core):
                    continue
                if accept(rest + (term or ".")):
                    core, progress = rest, True
                    break
            if progress:
                break
        if not progress:
            break
    return core + (term or "")


@dataclass
class Sanitized:
    text: str
    kept_irrelevant: list[str]      # ids of irrelevant attributes still stated
    lost_relevant: list[str]        # ids of relevant attributes no longer stated
    cut_sentences: int = 0          # sentences shortened rather than dropped


def sanitize(lines: list[Line], request_at: tuple[int, int] | None,
             relevant: dict[str, tuple[str, ...]], irrelevant: dict[str, tuple[str, ...]]) -> Sanitized:
    """Drop every sentence that states an irrelevant attribute (a form of it occurs), unless that
    would leave a relevant attribute unstated; then cut the clause instead; else keep it.

    `relevant`/`irrelevant` map attribute ids to the forms that state them (text and match).
    The request sentence is never dropped, only cut.
    """
    original = render_lines(lines)
    needed = {a: forms for a, forms in relevant.items() if find_form(original, forms)}
    irr_forms = [forms for forms in irrelevant.values()]

    def complete(text: str) -> bool:
        return all(find_form(text, forms) for forms in needed.values())

    cut = 0
    for i, line in enumerate(lines):
        for j, sentence in enumerate(line.sentences):
            if not sentence or not any(find_form(sentence, forms) for forms in irr_forms):
                continue
            if (i, j) != request_at:
                line.sentences[j] = None
                if complete(render_lines(lines)):
                    continue

            def accept(candidate: str, i=i, j=j) -> bool:
                saved = lines[i].sentences[j]
                lines[i].sentences[j] = candidate
                ok = complete(render_lines(lines))
                lines[i].sentences[j] = saved
                return ok

            shorter = cut_clauses(sentence, irr_forms, accept)
            line.sentences[j] = shorter
            cut += shorter != sentence
    text = render_lines(lines)
    return Sanitized(
        text=text,
        kept_irrelevant=[a for a, forms in irrelevant.items() if find_form(text, forms)],
        lost_relevant=[a for a, forms in relevant.items() if a in needed and not find_form(text, forms)],
        cut_sentences=cut,
    )
