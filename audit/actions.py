"""Reconstruct what the agent did from captured traffic alone, using what each site knows of itself."""

import re
from dataclasses import dataclass
from dataclasses import field
from urllib.parse import parse_qs
from urllib.parse import urlsplit

from spillage.origins.knowledge import SiteProfile

CONTENT = "content"
BEHAVIORAL = "behavioral"


@dataclass
class Action:
    """One observable interaction: what channel it used, what it said or selected, and its proof."""

    kind: str            # search, suggest, filter, section, view_product, add_to_cart, form, click, scroll
    channel: str         # content (text the agent authored) or behavioral (what it chose)
    text: str            # the query or field text sent, or the label of what was chosen
    seq: int             # the record that proves it
    url: str
    observers: list[str]
    evidence: list[int] = field(default_factory=list)
    detail: dict = field(default_factory=dict)
    clicked: list[str] = field(default_factory=list)   # labels of the clicks that led to it
    concepts: list[str] = field(default_factory=list)  # scenario concepts the chosen thing carries

    def as_json(self, number: int) -> dict:
        return {"n": number, "kind": self.kind, "channel": self.channel, "text": self.text,
                "seq": self.seq, "url": self.url, "observers": self.observers,
                "evidence": self.evidence, **({"detail": self.detail} if self.detail else {}),
                **({"clicked": self.clicked} if self.clicked else {}),
                **({"concepts": self.concepts} if self.concepts else {})}


def normalised_url(url: str) -> str:
    """A URL without its fragment, for matching a click's href to the request it caused."""
    return url.split("#", 1)[0]


def product_id(value: str) -> int | str:
    """A product id as the catalog keys it, or the text sent when it is not a number."""
    return int(value) if value.isdigit() else value


@dataclass
class Hit:
    """A first-party request being read: its record, its site, its path and query parameters."""

    record: dict
    profile: SiteProfile
    path: str
    params: dict[str, list[str]]

    def values(self, names) -> list[str]:
        """The non-blank values of the parameters `names`, in order."""
        return [v for name in names for v in self.params.get(name, ()) if v.strip()]

    def action(self, kind: str, channel: str, text: str, concepts=(), **detail) -> Action:
        return Action(kind, channel, text, self.record["seq"], self.record["url"], [self.profile.host],
                      detail=detail, concepts=[c for c in concepts if c])


class ActionBuilder:
    """Feed capture records in order; read `actions` at the end."""

    def __init__(self, profiles: dict[str, SiteProfile]):
        self.profiles = profiles
        self.actions: list[Action] = []
        self.last: dict[tuple, object] = {}  # what a listing, product or section page last showed
        self.pending_beacons: list[dict] = []

    def add(self, record: dict) -> None:
        """Take one record; requests to known sites and tracker beacons become actions."""
        if record["kind"] == "request":
            self.request(record)
        elif record["kind"] == "form":
            self.form(record)
        elif record["kind"] == "beacon":
            self.beacon(record)

    def swap(self, key: tuple, value):
        """Remember `value` under `key`; the value remembered before."""
        before = self.last.get(key)
        self.last[key] = value
        return before

    def request(self, record: dict) -> None:
        if record["method"] != "GET":
            return
        parts = urlsplit(record["url"])
        profile = self.profiles.get(parts.hostname or "")
        if profile is None:
            return
        hit = Hit(record, profile, parts.path, parse_qs(parts.query, keep_blank_values=True))
        g = profile.grammar
        if hit.path in g.search_paths:
            self.listing(hit, next(iter(hit.values([g.category_param])), None))
        elif m := re.fullmatch(g.category_path, hit.path):
            self.listing(hit, m.group(1))
        elif m := re.fullmatch(g.product_path, hit.path):
            self.product_page(hit, int(m.group(1)))
        elif m := re.fullmatch(g.section_path, hit.path):
            self.section_page(hit, m.group(1))
        elif hit.path == g.suggest_path:
            self.suggest(hit)

    def listing(self, hit: Hit, category: str | None) -> None:
        """A search or category page: a new query is a search, a new category and each newly added facet a filter."""
        p = hit.profile
        query = " ".join(hit.values(p.grammar.query_params))
        facets = frozenset(hit.values(p.grammar.facet_params))
        before_query, before_category, before_facets = (
            self.swap((p.host, hit.path), (query, category, facets)) or ("", None, frozenset()))
        if query and query != before_query:
            search = hit.action("search", CONTENT, query)
            typed = self.typing(p.host)
            if typed and query.lower().startswith(typed.text.lower()):  # typed, then submitted: one action
                self.actions.remove(typed)
                search.evidence = typed.evidence
            self.emit(search)
        if category and category != before_category:
            self.emit(hit.action("filter", BEHAVIORAL, p.categories.get(category, category), [category],
                                 category=category))
        for slug in sorted(facets - before_facets):
            facet = p.facets.get(slug)
            self.emit(hit.action("filter", BEHAVIORAL, facet.label if facet else slug,
                                 [facet.concept] if facet else [], facet=slug))

    def product_page(self, hit: Hit, pid: int) -> None:
        """A product page is a view unless it is the product last viewed; text searched on it is a search."""
        p = hit.profile
        if self.swap((p.host, "product"), pid) != pid:
            product = p.products.get(pid)
            self.emit(hit.action("view_product", BEHAVIORAL, product.title if product else f"product {pid}",
                                 product.concepts if product else (), product=pid))
        text = " ".join(hit.values(p.grammar.product_query_params))
        if text and self.swap((p.host, hit.path), text) != text:
            self.emit(hit.action("search", CONTENT, text, product=pid))

    def section_page(self, hit: Hit, slug: str) -> None:
        p = hit.profile
        if self.swap((p.host, "section"), slug) != slug:
            section = p.sections.get(slug)
            self.emit(hit.action("section", BEHAVIORAL, section.title if section else slug,
                                 [section.concept] if section else [], section=slug))

    def typing(self, host: str) -> Action | None:
        """The `suggest` action of `host` when it is the latest action."""
        last = self.actions[-1] if self.actions else None
        return last if last and last.kind == "suggest" and last.observers[0] == host else None

    def suggest(self, hit: Hit) -> None:
        """Text typed into a search box: a run of requests each extending or trimming the last is one
        action, which the search that submits it absorbs."""
        text = " ".join(hit.values([hit.profile.grammar.suggest_param]))
        if not text:
            return
        last = self.typing(hit.profile.host)
        if last and (text.startswith(last.text) or last.text.startswith(text)):
            last.evidence.append(hit.record["seq"])
            if len(text) > len(last.text):
                last.text, last.seq, last.url = text, hit.record["seq"], hit.record["url"]
            return
        self.emit(hit.action("suggest", CONTENT, text))

    def form(self, record: dict) -> None:
        parts = urlsplit(record["url"])
        profile = self.profiles.get(parts.hostname or "")
        if profile is None:
            return
        g = profile.grammar
        given = dict(record["fields"])
        evidence = [record["request"], record["seq"]]
        if parts.path == g.cart_add_path:
            pid = product_id(given.get(g.product_field, ""))
            product = profile.products.get(pid) if isinstance(pid, int) else None
            self.emit(Action("add_to_cart", BEHAVIORAL, product.title if product else str(pid),
                             record["request"], record["url"], [profile.host], evidence=evidence,
                             detail={"product": pid}, concepts=list(product.concepts) if product else []))
            return
        detail = {"fields": record["fields"]}
        if known := g.form(parts.path):
            detail["form"] = known[0]
            pid = known[1] or given.get(g.product_field)
            if pid:
                detail["product"] = product_id(pid)
        text = " ".join(value for _, value in record["fields"])
        self.emit(Action("form", CONTENT, text, record["request"], record["url"], [profile.host],
                         evidence=evidence, detail=detail))

    def beacon(self, record: dict) -> None:
        data = record["data"] if isinstance(record.get("data"), dict) else {}
        tracker = urlsplit(record["url"]).hostname or ""
        if record["event"] in ("click", "view"):
            self.pending_beacons.append(record)
        elif record["event"] == "scroll":
            seen = ", ".join(str(s) for s in data.get("seen") or ())
            self.emit(Action("scroll", BEHAVIORAL, seen, record["seq"], str(data.get("page", "")),
                             [tracker], detail={"depth": data.get("depth")}))

    def emit(self, action: Action) -> None:
        action.evidence = sorted({*action.evidence, action.seq})
        self.actions.append(action)

    def finish(self) -> list[Action]:
        """All actions in traffic order, with the beacons that saw them folded in.

        A click whose `href` is the URL of an action joins the nearest such action, and a
        click without `href` (a submit button) the nearest action after it; a click that
        caused no request is an action of its own, which the same click's beacon to another
        observer (the shop's own log and the tracker both report clicks) joins. A page view
        whose `page` is the URL of an action tells its observer about that action too (a
        search's query is in its URL).
        """
        own_clicks: dict[tuple, Action] = {}  # the latest click action per (page, label, href)
        for beacon in self.pending_beacons:
            data = beacon["data"] if isinstance(beacon.get("data"), dict) else {}
            url = data.get("href") if beacon["event"] == "click" else data.get("page")
            if url is None:  # a submit button: only what came after the click can be its doing
                candidates = [a for a in self.actions if a.kind != "scroll" and a.seq > beacon["seq"]]
            else:
                candidates = [a for a in self.actions if a.kind not in ("scroll", "click")
                              and normalised_url(a.url) == normalised_url(str(url))]
            tracker = urlsplit(beacon["url"]).hostname or ""
            if candidates:
                action = min(candidates, key=lambda a: abs(a.seq - beacon["seq"]))
                label = str(data.get("label") or "") if beacon["event"] == "click" else ""
                if label and label not in action.clicked:  # one click, reported to each observer
                    action.clicked.append(label)
                fold(action, beacon["seq"], tracker)
            elif beacon["event"] == "click":
                key = (data.get("page"), data.get("label"), data.get("href"))
                same = own_clicks.get(key)
                if same is not None and tracker not in same.observers:
                    fold(same, beacon["seq"], tracker)
                else:
                    own_clicks[key] = Action("click", BEHAVIORAL, str(data.get("label", "")), beacon["seq"],
                                             str(data.get("page", "")), [tracker], evidence=[beacon["seq"]])
                    self.actions.append(own_clicks[key])
        self.pending_beacons = []
        return sorted(self.actions, key=lambda a: a.seq)


def fold(action: Action, seq: int, observer: str) -> None:
    """Add a beacon to the evidence of `action`, and its receiver to the observers."""
    action.evidence = sorted({*action.evidence, seq})
    if observer not in action.observers:
        action.observers.append(observer)
