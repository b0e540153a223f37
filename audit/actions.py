"""Reconstruct what the agent did from captured traffic alone, using what each site knows of itself."""

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

    kind: str            # search, filter, view_product, add_to_cart, form, click, scroll
    channel: str         # content (text the agent authored) or behavioral (what it chose)
    text: str            # the query or field text sent, or the label of what was chosen
    seq: int             # the record that proves it
    url: str
    observers: list[str]
    evidence: list[int] = field(default_factory=list)
    detail: dict = field(default_factory=dict)
    clicked: list[str] = field(default_factory=list)  # labels of the clicks that led to it

    def as_json(self, number: int) -> dict:
        return {"n": number, "kind": self.kind, "channel": self.channel, "text": self.text,
                "seq": self.seq, "url": self.url, "observers": self.observers,
                "evidence": self.evidence, **({"detail": self.detail} if self.detail else {}),
                **({"clicked": self.clicked} if self.clicked else {})}


def normalised_url(url: str) -> str:
    """A URL without its fragment, for matching a click's href to the request it caused."""
    return url.split("#", 1)[0]


class ActionBuilder:
    """Feed capture records in order; read `actions` at the end."""

    def __init__(self, profiles: dict[str, SiteProfile]):
        self.profiles = profiles
        self.actions: list[Action] = []
        self.last_listing: dict[tuple[str, str], tuple[str, frozenset]] = {}
        self.pending_beacons: list[dict] = []

    def add(self, record: dict) -> None:
        """Take one record; requests to known sites and tracker beacons become actions."""
        if record["kind"] == "request":
            self.request(record)
        elif record["kind"] == "form":
            self.form(record)
        elif record["kind"] == "beacon":
            self.beacon(record)

    def request(self, record: dict) -> None:
        if record["method"] != "GET":
            return
        parts = urlsplit(record["url"])
        profile = self.profiles.get(parts.hostname or "")
        if profile is None:
            return
        params = parse_qs(parts.query, keep_blank_values=True)
        if parts.path == profile.search_path or profile.category_path.fullmatch(parts.path):
            self.listing(record, profile, parts.path, params)
        elif (m := profile.product_path.fullmatch(parts.path)):
            product = profile.products.get(int(m.group(1)))
            title = product.title if product else f"product {m.group(1)}"
            self.emit(Action("view_product", BEHAVIORAL, title, record["seq"], record["url"],
                             [profile.host], detail={"product": int(m.group(1))}))

    def listing(self, record: dict, profile: SiteProfile, path: str, params: dict) -> None:
        """A search or category page: a new query is a search, each newly added facet a filter."""
        query = " ".join(v for k in profile.query_params for v in params.get(k, ()))
        facets = frozenset(params.get(profile.facet_param, ()))
        where = (profile.host, path)
        previous_query, previous_facets = self.last_listing.get(where, (None, frozenset()))
        self.last_listing[where] = (query, facets)
        if query and query != previous_query:
            self.emit(Action("search", CONTENT, query, record["seq"], record["url"], [profile.host]))
        for slug in sorted(facets - previous_facets):
            label = profile.facets.get(slug, slug)
            self.emit(Action("filter", BEHAVIORAL, label, record["seq"], record["url"],
                             [profile.host], detail={"facet": slug}))

    def form(self, record: dict) -> None:
        parts = urlsplit(record["url"])
        profile = self.profiles.get(parts.hostname or "")
        if profile is None:
            return
        fields = dict(record["fields"])
        if parts.path == profile.cart_add_path:
            product_id = fields.get(profile.cart_product_field, "")
            product = profile.products.get(int(product_id)) if product_id.isdigit() else None
            self.emit(Action("add_to_cart", BEHAVIORAL, product.title if product else product_id,
                             record["request"], record["url"], [profile.host],
                             evidence=[record["seq"]], detail={"product": product_id}))
        else:
            text = " ".join(value for _, value in record["fields"])
            self.emit(Action("form", CONTENT, text, record["request"], record["url"], [profile.host],
                             evidence=[record["seq"]], detail={"fields": record["fields"]}))

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
        if action.seq not in action.evidence:
            action.evidence.insert(0, action.seq)
        self.actions.append(action)

    def finish(self) -> list[Action]:
        """All actions in traffic order, with the tracker beacons that saw them folded in.

        A click whose `href` is the URL of an action joins the nearest such action, and a
        click without `href` (a submit button) the nearest action after it; a click that
        caused no request is an action of its own. A page view whose `page` is the URL of an
        action tells the tracker about that action too (a search's query is in its URL).
        """
        for beacon in self.pending_beacons:
            data = beacon["data"] if isinstance(beacon.get("data"), dict) else {}
            url = data.get("href") if beacon["event"] == "click" else data.get("page")
            if url is None:  # a submit button: only what came after the click can be its doing
                candidates = [a for a in self.actions if a.kind != "scroll" and a.seq > beacon["seq"]]
            else:
                candidates = [a for a in self.actions if a.kind != "scroll"
                              and normalised_url(a.url) == normalised_url(str(url))]
            tracker = urlsplit(beacon["url"]).hostname or ""
            if candidates:
                action = min(candidates, key=lambda a: abs(a.seq - beacon["seq"]))
                action.evidence = sorted({*action.evidence, beacon["seq"]})
                if beacon["event"] == "click" and data.get("label"):
                    action.clicked.append(str(data["label"]))
                if tracker not in action.observers:
                    action.observers.append(tracker)
            elif beacon["event"] == "click":
                self.actions.append(Action("click", BEHAVIORAL, str(data.get("label", "")),
                                           beacon["seq"], str(data.get("page", "")), [tracker],
                                           evidence=[beacon["seq"]]))
        self.pending_beacons = []
        return sorted(self.actions, key=lambda a: a.seq)
