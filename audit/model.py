"""What the auditor reasons about: actions read from traffic, and leak events judged on them."""

from dataclasses import dataclass
from dataclasses import field

from spillage.scenarios.model import Attribute

CONTENT = "content"
BEHAVIORAL = "behavioral"
KINDS = ("type", "click", "select", "scroll", "navigate", "submit")  # the gesture an action is
CATEGORIES = ("C_E", "C_I", "B_E", "B_I")
C_E, C_I, B_E, B_I = CATEGORIES
FIRST_PARTY = "first-party"
THIRD_PARTY = "third-party"


@dataclass
class Action:
    """One user gesture as observers saw it: what it said (content) or chose (behavioral), and its proof.

    `seq` is the record that best proves it (the request of a navigation or form, the beacon of a
    click that caused no request); `evidence` holds every record that belongs to it. `sent` holds
    the free text it carried on the wire, decoded (queries, field values, JSON strings, ...);
    `concepts` the scenario concepts of what it chose (catalog facts)."""

    kind: str            # type, click, select, scroll, navigate, submit
    what: str            # search, suggest, filter, unfilter, sort, section, view_product, add_to_cart, ...
    channel: str         # content or behavioral
    text: str            # the query or field text sent, or the label of what was chosen
    seq: int
    url: str
    observers: list[str]
    evidence: list[int] = field(default_factory=list)
    detail: dict = field(default_factory=dict)
    clicked: list[str] = field(default_factory=list)   # labels of the clicks that led to it
    concepts: list[str] = field(default_factory=list)
    sent: list[str] = field(default_factory=list)

    def as_json(self, number: int) -> dict:
        return {"n": number, "kind": self.kind, "what": self.what, "channel": self.channel, "text": self.text,
                "seq": self.seq, "url": self.url, "observers": self.observers, "evidence": self.evidence,
                **({"detail": self.detail} if self.detail else {}),
                **({"clicked": self.clicked} if self.clicked else {}),
                **({"concepts": self.concepts} if self.concepts else {}),
                **({"sent": self.sent} if self.sent else {})}


@dataclass(frozen=True)
class Event:
    """(action, irrelevant attribute, category), with what matched, who saw it and who judged it."""

    category: str
    attribute: Attribute
    action: int                  # number of the action in the session, from 1
    matched: str                 # the surface form, cue, concept or evidence text that names it
    seq: int                     # the action's seq
    evidence: tuple[int, ...]
    observers: tuple[str, ...]
    judge: str = "lexical"
    confidence: float = 1.0
    reasoning: str = ""
    uncertain: bool = False      # the judge cannot tell it from a look-alike: reported, never counted

    def as_json(self) -> dict:
        return {"category": self.category, "attribute": self.attribute.id, "class": self.attribute.cls,
                "action": self.action, "matched": self.matched, "seq": self.seq,
                "evidence": list(self.evidence), "observers": list(self.observers), "judge": self.judge,
                "confidence": self.confidence, **({"reasoning": self.reasoning} if self.reasoning else {}),
                **({"uncertain": True} if self.uncertain else {})}


def observer_party(observer: str, site: str) -> str:
    """first-party for the scenario's own site, third-party for anyone else (trackers, refused hosts)."""
    return FIRST_PARTY if observer == site else THIRD_PARTY
