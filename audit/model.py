"""What the auditor reasons about: actions read from traffic, and leak events judged on them."""

from dataclasses import dataclass
from dataclasses import field
from dataclasses import replace

from spillage.audit.observers import same_party
from spillage.proxy.reading.request import Piece
from spillage.scenarios.model import Attribute

CONTENT = "content"
BEHAVIORAL = "behavioral"
KINDS = ("type", "click", "select", "scroll", "navigate", "submit")  # the gesture an action is
CATEGORIES = ("C_E", "C_I", "B_E", "B_I")
C_E, C_I, B_E, B_I = CATEGORIES
FIRST_PARTY = "first-party"
MAX_ALSO = 64   # later records an action keeps for one text it carried
THIRD_PARTY = "third-party"


@dataclass(frozen=True)
class Placed:
    """A text an action carried and where it was on the wire: the record that carried it (`seq`, and
    `also` the later ones that carried it again), the piece of the request (its place, decodings and
    raw value), its receivers, and whether it is the action's own text (what was typed or sent as the
    gesture) or rode along with it (a header, a cookie, a parameter name...)."""

    seq: int
    piece: Piece
    own: bool = True
    observers: tuple[str, ...] = ()
    also: tuple[int, ...] = ()

    @property
    def text(self) -> str:
        return self.piece.text

    @property
    def seqs(self) -> tuple[int, ...]:
        return (self.seq, *self.also)

    def as_json(self) -> dict:
        return {"seq": self.seq, **self.piece.as_json(), **({} if self.own else {"rode_along": True})}


@dataclass
class Action:
    """One user gesture as observers saw it: what it said (content) or chose (behavioral), and its proof.

    `seq` is the record that best proves it (the request of a navigation or form, the beacon of a
    click that caused no request); `evidence` holds every record that belongs to it. `sent` holds
    the free text it carried on the wire, decoded (queries, field values, JSON strings, ...);
    `places` where each text was (docs/AUDIT.md, "What the observer reads"), its own and what rode
    along with it; `concepts` the scenario concepts of what it chose (catalog facts)."""

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
    places: list[Placed] = field(default_factory=list)

    def carried(self, placed: list[Placed]) -> None:
        """Add `placed` texts: each (place, text) once, with every record that carried it and its receivers."""
        index = {(p.piece.where, p.text): i for i, p in enumerate(self.places)}
        for p in placed:
            i = index.get((p.piece.where, p.text))
            if i is None:
                index[(p.piece.where, p.text)] = len(self.places)
                self.places.append(p)
            elif p.seq not in self.places[i].seqs and len(self.places[i].also) < MAX_ALSO:
                known = self.places[i]
                self.places[i] = replace(known, also=(*known.also, p.seq),
                                         observers=tuple(dict.fromkeys([*known.observers, *p.observers])))

    def place_of(self, text: str) -> Placed | None:
        """Where `text` (one of the action's texts) was on the wire, if known."""
        return next((p for p in self.places if p.text == text), None)

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
    place: Placed | None = None  # where the matched text was on the wire

    def as_json(self) -> dict:
        return {"category": self.category, "attribute": self.attribute.id, "class": self.attribute.cls,
                "action": self.action, "matched": self.matched, "seq": self.seq,
                "evidence": list(self.evidence), "observers": list(self.observers), "judge": self.judge,
                "confidence": self.confidence, **({"reasoning": self.reasoning} if self.reasoning else {}),
                **({"uncertain": True} if self.uncertain else {}),
                **({"place": self.place.as_json()} if self.place else {})}


def observer_party(observer: str, site: str) -> str:
    """first-party for the site's own registrable domain (audit/observers.py), third-party for anyone else
    (trackers, refused hosts)."""
    return FIRST_PARTY if same_party(observer, site) else THIRD_PARTY
