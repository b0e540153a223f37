"""Scenarios: a persona prompt, the task inside it, and the persona's labelled attributes."""

import re
from dataclasses import dataclass
from dataclasses import field

from spillage.proxy.settings import SITES  # noqa: F401 - the scenario model names them (proxy/settings.py)
from spillage.proxy.settings import STYLES
from spillage.scenarios.matching import find_form

CLASSES = (
    "health", "mental health", "reproductive", "family/marital", "sexuality", "religion",
    "ethnicity/culture", "finances", "employment", "location", "age", "disability",
    "politics", "legal", "lifestyle/brand preference",
    "requirement",  # a plain product specification; relevant attributes only
)
SENSITIVE_CLASSES = CLASSES[:-1]
PREFERENCE = "lifestyle/brand preference"
CONDITIONS = ("new", "refurbished", "used", "for-parts")
DERIVABLE = ("match", "concepts", "success", "sanitized_prompt")
PRICE_CEILING = "price-ceiling"  # the concept of a budget attribute that sets success.max_price


@dataclass(frozen=True)
class Attribute:
    """One thing the persona says about themselves, labelled for the task."""

    id: str
    text: str                   # as the persona says it
    relevant: bool              # needed for the task?
    cls: str                    # `class` in YAML: health, religion, finances, …
    match: tuple[str, ...]      # surface forms that state it verbatim
    cues: tuple[str, ...] = ()  # phrases that let an observer infer it
    concepts: tuple[str, ...] = ()  # vocabulary tags of site surfaces that name or imply it
    guessed: bool = False       # class guessed by a tool
    look_alikes: tuple[str, ...] = ()  # phrases in which a match form means something else ("kosher salt")


@dataclass(frozen=True)
class Success:
    """Which catalog products complete the task: all given fields must hold."""

    category: str
    features: tuple[str, ...] = ()
    max_price: float | None = None
    condition: tuple[str, ...] = ()

    def roles(self) -> set[str]:
        """The concepts through which a relevant attribute can take part in the task."""
        roles = {self.category, *self.features, *self.condition}
        if self.max_price is not None:
            roles.add(PRICE_CEILING)
        return roles - {""}


@dataclass(frozen=True)
class Scenario:
    """A persona-rich prompt for one task on one site, with ground-truth labels."""

    id: str
    site: str
    style: str
    task: str
    request: str
    prompt: str
    sanitized_prompt: str
    attributes: tuple[Attribute, ...]
    success: Success
    persona: str = ""                       # the persona file's id (the scenario id without style)
    derived: frozenset[str] = frozenset()   # fields a tool derived; their problems are warnings
    source: dict | None = None              # where an imported scenario came from
    file: str = field(default="", compare=False)
    lines: dict = field(default_factory=dict, compare=False, repr=False)  # field path → line

    @property
    def relevant(self) -> tuple[Attribute, ...]:
        return tuple(a for a in self.attributes if a.relevant)

    @property
    def irrelevant(self) -> tuple[Attribute, ...]:
        return tuple(a for a in self.attributes if not a.relevant)

    @property
    def start_url(self) -> str:
        return f"https://{self.site}/"

    def text_line(self, path: str, forms: tuple[str, ...]) -> int | None:
        """The line of the field's literal block text where one of `forms` occurs, else the field's line."""
        first = self.lines.get(f"{path}#text")
        text = getattr(self, path.rpartition(".")[2], "")
        if first is not None and isinstance(text, str):
            for offset, line in enumerate(text.splitlines()):
                if find_form(line, forms):
                    return first + offset
        return self.line(path)

    def line(self, path: str) -> int | None:
        """The line a field was read from, or of its nearest enclosing field."""
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path.rpartition(".")[0]
        return self.lines.get("")


def attribute_concepts(attribute: Attribute) -> tuple[str, ...]:
    """The attribute's concepts, or the one the catalog generator gives an attribute that has none
    (an imported one): `about-<its first match form>` (else its text), as a slug."""
    if attribute.concepts:
        return attribute.concepts
    return ("about-" + (re.sub(r"[^a-z0-9]+", "-", (attribute.match[0] if attribute.match else attribute.text).lower())
                        .strip("-") or "x"),)
