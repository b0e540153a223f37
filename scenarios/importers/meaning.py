"""What an imported attribute takes from the benchmark attribute that means the same.

The benchmark's persona files (scenarios/shop, scenarios/bazaar) label each irrelevant attribute
with the vocabulary's concepts (the facets, sections and products that imply it) and with cues.
An imported attribute that says the same thing as one of them — its text and theirs are close in
all-MiniLM-L6-v2's embedding (cosine ≥ SAME_MEANING) — takes those concepts and cues, and the
benchmark's match forms as its own (they name the same thing): the paper's "divorce" takes the
benchmark's "the divorce was finalized" (0.71): concept `newly-single`, cues "officially single",
"signed the papers", forms "divorced", "divorcee".

The threshold was read off the 30 chat personas of the paper's data, by hand: at 0.6 and above
every pairing means the same ("American-made products" ~ "I only buy American-made", 0.71;
"minimalist aesthetic" ~ "I'm a minimalist about everything", 0.60); below it, pairings share a
word and not a meaning ("well-known brand" ~ "I only buy from certified B Corps", 0.50).

Texts and forms with a number take part in nothing: "34 years old" is close in meaning to "I'm 41".

Needs the model package (docs/JUDGES.md); without it nothing is borrowed, and `available()` says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from spillage.scenarios.files import BENCHMARK_DIRS
from spillage.scenarios.files import scenario_files
from spillage.scenarios.model import Attribute

SAME_MEANING = 0.6
NUMBER = re.compile(r"\d")   # an age or an amount is never lent nor borrowed: "I'm 41" is close to "34 years old"


@dataclass(frozen=True)
class Borrowed:
    """What an imported attribute takes, and from which benchmark attribute."""

    source: str                 # "<persona>/<attribute id>"
    cosine: float
    concepts: tuple[str, ...]
    cues: tuple[str, ...]
    match: tuple[str, ...]

    def reason(self) -> str:
        return f"means what benchmark attribute {self.source} means (cosine {self.cosine:.2f})"


def available() -> bool:
    from spillage.scenarios import minilm

    return minilm.installed()


@cache
def benchmark_attributes() -> tuple[tuple[str, Attribute], ...]:
    """(persona, attribute) of every irrelevant benchmark attribute with concepts, one per persona."""
    from spillage.scenarios.loader import load_file

    seen: dict[tuple[str, str], Attribute] = {}
    for path in scenario_files(BENCHMARK_DIRS):
        for scenario in load_file(path)[:1]:   # the styles of a persona share their attributes
            for a in scenario.irrelevant:
                if a.concepts and not NUMBER.search(a.text):
                    seen.setdefault((scenario.persona, a.id), a)
    return tuple((persona, a) for (persona, _), a in seen.items())


@cache
def benchmark_vectors():
    """The embeddings of the benchmark attributes' texts, in `benchmark_attributes()` order."""
    from spillage.scenarios import minilm

    return minilm.load().encode([a.text for _, a in benchmark_attributes()])


def borrow(texts: list[str]) -> list[Borrowed | None]:
    """For each text, what the benchmark attribute meaning the same lends it (None: none does)."""
    if not texts or not available():
        return [None] * len(texts)
    from spillage.scenarios import minilm

    known = benchmark_attributes()
    scores = minilm.load().encode(texts) @ benchmark_vectors().T
    out: list[Borrowed | None] = []
    for text, row in zip(texts, scores):
        i = int(row.argmax())
        persona, a = known[i]
        wordy = lambda forms: tuple(f for f in forms if not NUMBER.search(f))   # noqa: E731
        out.append(Borrowed(f"{persona}/{a.id}", float(row[i]), a.concepts, wordy(a.cues), wordy(a.match))
                   if row[i] >= SAME_MEANING and not NUMBER.search(text) else None)
    return out
