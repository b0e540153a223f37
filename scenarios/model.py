"""Scenarios: a persona prompt, the task inside it, and the persona's labelled attributes."""

from dataclasses import dataclass
from dataclasses import field

SITES = ("shop.test", "bazaar.test")
STYLES = ("chat", "email", "generic")


@dataclass(frozen=True)
class Attribute:
    """One thing the persona says about themselves, labelled for the task."""

    id: str
    text: str                   # as the persona says it
    relevant: bool              # needed for the task?
    cls: str                    # `class` in YAML: health, religion, finances, …
    match: tuple[str, ...]      # surface forms that state it verbatim
    cues: tuple[str, ...] = ()  # phrases that let an observer infer it
    concepts: tuple[str, ...] = ()  # site tags (facets, sections) that name or imply it


@dataclass(frozen=True)
class Success:
    """Which catalog products complete the task."""

    category: str
    facets_all: tuple[str, ...] = ()
    max_price: float | None = None


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
    source: str = field(default="", compare=False)  # the file it was loaded from

    @property
    def relevant(self) -> tuple[Attribute, ...]:
        return tuple(a for a in self.attributes if a.relevant)

    @property
    def irrelevant(self) -> tuple[Attribute, ...]:
        return tuple(a for a in self.attributes if not a.relevant)

    @property
    def start_url(self) -> str:
        return f"https://{self.site}/"
