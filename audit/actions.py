"""Reconstruct what the agent did from captured traffic alone, using what each site knows of itself.

Feed capture records in order to `ActionBuilder.add`; `finish()` returns the actions. The rules
(one gesture is one action, what merges, who observed what) are in docs/AUDIT.md.
"""

import json
import re
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs
from urllib.parse import unquote
from urllib.parse import urlsplit

from spillage.audit.model import BEHAVIORAL
from spillage.audit.model import CONTENT
from spillage.audit.model import Action
from spillage.audit.wire import decode_value
from spillage.audit.wire import json_strings
from spillage.audit.wire import texts_of
from spillage.proxy.beacons import DEFAULT_BEACON_URLS
from spillage.proxy.beacons import beacon_target
from spillage.proxy.beacons import endpoints
from spillage.proxy.capturelog import read_body
from spillage.origins.grammar import path_id
from spillage.origins.knowledge import SiteProfile
from spillage.origins.knowledge import profile_for

FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
FORM_WHAT = {"ask": "ask", "offer": "offer", "checkout": "checkout", "list-add": "add_to_list",
             "watch": "watch", "cart-remove": "cart_remove"}
BEHAVIORAL_FORMS = ("add_to_list", "watch", "cart_remove")  # forms whose fields only choose
CHOICE_FIELDS = ("select-one", "select-multiple", "checkbox", "radio")  # fields whose value is a choice
# A GET for one of these is the browser fetching part of a page, not a page the agent asked for.
SUBRESOURCES = ("script", "style", "image", "font", "audio", "video", "track", "manifest", "worker",
                "sharedworker", "serviceworker", "object", "embed")
STATIC_FILE = re.compile(r".*\.(js|mjs|css|png|jpe?g|gif|webp|avif|svg|ico|woff2?|ttf|otf|map|json|txt|xml|webmanifest)",
                         re.IGNORECASE)
WORD = re.compile(r"(?<![A-Za-z0-9])(?=[A-Za-z]*[a-z])[A-Za-z]{3,}(?![A-Za-z0-9])")  # not an id like B07D9CQZM6
PATH_WORDS = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_+][A-Za-z0-9]+)+")  # a segment of two or more joined words
MAX_SUGGESTIONS = 256 * 1024  # bytes of an autocomplete answer that are read
WINDOW = 400  # records within which a beacon and the request it belongs to arrive (bounds memory)
REFUSED = "refused:"  # observer prefix of a host the proxy refused (it would have seen the request)
# Event endpoints whose requests the proxy also records as beacons (a log's session_start says which).


def normalised_url(url: str) -> str:
    """A URL without its fragment, for matching a click's href to the request it caused."""
    return url.split("#", 1)[0]


def product_id(value: str) -> int | str:
    """A product id as the catalog keys it, or the text sent when it is not a number (an ASIN)."""
    return int(value) if value.isdigit() and str(int(value)) == value else value


def header(record: dict, name: str) -> str:
    """The first value of a header of a request record, lower-cased name match."""
    return next((v for k, v in record.get("headers") or () if k.lower() == name), "")


@dataclass
class Hit:
    """A request to a site being read: its record, its site, its path and query parameters, and who
    saw it (the site, or `refused:<host>` when the proxy refused it)."""

    record: dict
    profile: SiteProfile
    path: str
    params: dict[str, list[str]]
    observer: str

    def values(self, names) -> list[str]:
        """The non-blank values of the parameters `names`, in order."""
        return [v for name in names if name for v in self.params.get(name, ()) if v.strip()]

    def action(self, what: str, channel: str, text: str, concepts=(), sent=(), **detail) -> Action:
        return Action("navigate", what, channel, text, self.record["seq"], self.record["url"],
                      [self.observer], detail=detail, concepts=[c for c in concepts if c],
                      sent=[t for t in sent if t])


@dataclass(frozen=True)
class Pending:
    """A click, view or submit beacon waiting for its action: only what folding it needs."""

    seq: int
    event: str
    observer: str
    url: str | None      # the link clicked, the page viewed, the form submitted (None: a button)
    label: str
    page: str
    detail: dict

    @property
    def key(self) -> tuple:
        return (self.page, self.label, self.url)

    @classmethod
    def of(cls, record: dict, data: dict, observer: str) -> "Pending":
        event = record["event"]
        url = data.get("href") if event == "click" else data.get("action") if event == "submit" else data.get("page")
        return cls(record["seq"], event, observer, normalised_url(str(url)) if url else None,
                   str(data.get("label") or "") if event == "click" else "", str(data.get("page", "")),
                   {k: data[k] for k in ("product", "facet", "section") if data.get(k)})


class ActionBuilder:
    """Feed capture records in order; `finish()` returns the actions."""

    def __init__(self, profiles: dict[str, SiteProfile], session_dir: Path | None = None):
        self.profiles = profiles
        self.session_dir = session_dir
        self.actions: list[Action] = []
        self.last: dict[tuple, object] = {}   # what a listing, product or section page last showed
        self.pending: deque[Pending] = deque()  # click, view and submit beacons waiting for their action
        self.by_url: dict[str, Action] = {}     # the latest action per URL, for beacons that come after it
        self.own_clicks: dict[tuple, Action] = {}  # click actions that caused no request, by (page, label, href)
        self.fields: deque[dict] = deque()      # field values a tracker saw typed, waiting for a form
        self.scrolling: Action | None = None  # the scroll action that impressions still join
        self.beacon_urls = endpoints(DEFAULT_BEACON_URLS)
        self.on_load: dict[str, set[str]] = {}  # page URL → the products and sections in view as it loaded
        self.sites: dict[str, SiteProfile | None] = {}  # host → its site's profile, as found
        self.suggest_requests: set[int] = set()  # seqs of autocomplete requests, whose answers we read
        self.offered: set[str] = set()           # suggestions the sites offered (lower case)
        self.prefix_of: dict[int, Action] = {}   # id() of a chosen suggestion → the typing that led to it

    def site(self, host: str | None) -> SiteProfile | None:
        """The profile of the site at `host` (www.amazon.de is amazon.com), or None."""
        if host not in self.sites:
            self.sites[host] = profile_for(self.profiles, host) if host else None
        return self.sites[host]

    def add(self, record: dict) -> None:
        """Take one record; first-party requests, forms, beacons and refused agent requests become actions."""
        self.expire(record["seq"] - WINDOW)
        kind = record["kind"]
        if kind == "session_start":
            options = record.get("options") or {}
            self.beacon_urls = endpoints(options.get("beacon_urls") or DEFAULT_BEACON_URLS)
        elif kind == "request":
            self.request(record)
        elif kind == "response" and record.get("request") in self.suggest_requests:
            self.offered |= suggestions(read_body(self.session_dir, record.get("body")) if self.session_dir else b"")
        elif kind == "form":
            self.form(record)
        elif kind == "beacon":
            self.beacon(record)
        elif kind == "egress_blocked" and not record.get("background"):
            self.refused(record)

    def swap(self, key: tuple, value):
        """Remember `value` under `key`; the value remembered before."""
        before = self.last.get(key)
        self.last[key] = value
        return before

    # --- requests ---------------------------------------------------------------------------

    def request(self, record: dict) -> None:
        parts = urlsplit(record["url"])
        profile = self.site(parts.hostname)
        if profile is None or beacon_target(record["url"]) in self.beacon_urls:
            return  # not a site we know, or an event endpoint: its `beacon` record tells what was seen
        if record["method"] != "GET":
            if header(record, "content-type").split(";")[0].strip().lower() not in FORM_TYPES:
                self.free_text(record, profile.host, "submit")  # JSON, text, ...: forms come as `form`
            return
        if self.page(self.hit(record, parts, profile, profile.host)):
            return
        if parts.query:
            self.free_text(record, profile.host, "navigate")
        elif words := path_words(record, parts.path):
            self.emit(Action("navigate", "navigate", CONTENT, " | ".join(words)[:500], record["seq"], record["url"],
                             [profile.host], sent=words))

    @staticmethod
    def hit(record: dict, parts, profile: SiteProfile, observer: str) -> Hit:
        return Hit(record, profile, parts.path or "/", parse_qs(parts.query, keep_blank_values=True), observer)

    def page(self, hit: Hit) -> bool:
        """Read a GET by its site's grammar; whether it is a page the grammar knows. Text in a
        parameter the grammar does not read is content of its own (`url_text`)."""
        if not self.known_page(hit):
            return False
        extra = sorted(name for name in hit.params if not hit.profile.grammar.reads(name))
        sent = [t for name in extra for v in hit.params[name] for t in self.decoded(v) if WORD.search(t)]
        if sent:
            self.emit(hit.action("url_text", CONTENT, " | ".join(dict.fromkeys(sent))[:500], sent=sent, params=extra))
        return True

    def known_page(self, hit: Hit) -> bool:
        g = hit.profile.grammar
        if g.is_search(hit.path):
            category = next(iter(hit.values([g.category_param])), None)
            self.listing(hit, None if category in g.all_categories else category)
        elif m := re.fullmatch(g.category_path, hit.path):
            self.listing(hit, path_id(m))
        elif m := re.fullmatch(g.product_path, hit.path):
            self.product_page(hit, product_id(path_id(m)), m.groupdict().get("title"))
        elif m := re.fullmatch(g.section_path, hit.path):
            self.section_page(hit, path_id(m))
        elif re.fullmatch(g.suggest_path, hit.path):
            self.suggest(hit)
        else:
            return False
        return True

    def words_sent(self, record: dict) -> list[str]:
        """The decoded texts a request carried that hold words (not bare numbers or ids)."""
        return [t for t in texts_of(record, self.session_dir) if any(c.isalpha() for c in t)]

    def free_text(self, record: dict, observer: str, kind: str) -> None:
        """A request that is no page of the site but carries text: content, whatever it says."""
        sent = self.words_sent(record)
        if sent:
            self.emit(Action(kind, "post" if kind == "submit" else "navigate", CONTENT, " | ".join(sent)[:500],
                             record["seq"], record["url"], [observer], sent=sent))

    def refused(self, record: dict) -> None:
        """An agent request the proxy refused: its host would have seen it (a search engine, say).
        A page of a site we have a profile for (a search on amazon.com over plain HTTP) is read as
        that page, observed by the refused host; anything else is a `navigate`."""
        parts = urlsplit(record["url"])
        host = record.get("host") or parts.hostname or ""
        profile = self.site(host) if record["method"] == "GET" else None
        if profile is not None and self.page(self.hit(record, parts, profile, REFUSED + host)):
            return
        sent = self.words_sent(record)
        self.emit(Action("navigate", "navigate", CONTENT if sent else BEHAVIORAL, " | ".join(sent)[:500] or host,
                         record["seq"], record["url"], [REFUSED + host], sent=sent,
                         detail={"refused": host}))

    def listing(self, hit: Hit, category: str | None) -> None:
        """A search or category page: a new query is a search; a new category or facet a filter,
        a dropped one an unfilter; a new sort order a sort; another page a paginate."""
        p, g = hit.profile, hit.profile.grammar
        query = " ".join(hit.values(g.query_params))
        facets = frozenset(g.facets(hit.params))
        sort = " ".join(hit.values([g.sort_param]))
        page = " ".join(hit.values([g.page_param])) or "1"
        before = self.swap((p.host, hit.path), (query, category, facets, sort, page))
        b_query, b_category, b_facets, b_sort, b_page = before or ("", None, frozenset(), "", "1")
        if query and query != b_query:
            search = hit.action("search", CONTENT, query, sent=self.decoded(query))
            self.absorb_typing(search)
            self.emit(search)
        if category and category != b_category:
            self.emit(hit.action("filter", BEHAVIORAL, p.categories.get(category, category), [category],
                                 category=category))
        for slug in sorted(facets - b_facets):
            facet = p.facets.get(slug)
            self.emit(hit.action("filter", BEHAVIORAL, facet.label if facet else g.facet_label(slug),
                                 [facet.concept] if facet else [], facet=slug))
        same_search = before is not None and query == b_query  # a new query starts afresh
        for slug in sorted(b_facets - facets) if same_search else ():
            facet = p.facets.get(slug)
            self.emit(hit.action("unfilter", BEHAVIORAL, facet.label if facet else g.facet_label(slug), facet=slug))
        if same_search and sort != b_sort:
            self.emit(hit.action("sort", BEHAVIORAL, sort or "default", sort=sort))
        if before and page != b_page and (query, category, facets, sort) == (b_query, b_category, b_facets, b_sort):
            self.emit(hit.action("paginate", BEHAVIORAL, f"page {page}", page=page))

    def decoded(self, text: str) -> list[str]:
        return [t for t in decode_value(text) if t]

    def product_page(self, hit: Hit, pid: int | str, title: str | None = None) -> None:
        """A product page is a view unless it is the product last viewed; text searched on it is a search.
        A product the catalog does not know is labelled by the title in its URL, if any."""
        p = hit.profile
        if self.swap((p.host, "product"), pid) != pid:
            product = p.products.get(pid)
            label = product.title if product else unquote(title or "").replace("-", " ")
            self.emit(hit.action("view_product", BEHAVIORAL, label or f"product {pid}",
                                 product.concepts if product else (), product=pid))
        text = " ".join(hit.values(p.grammar.product_query_params))
        if text and self.swap((p.host, hit.path), text) != text:
            self.emit(hit.action("search", CONTENT, text, sent=self.decoded(text), product=pid))

    def section_page(self, hit: Hit, slug: str) -> None:
        p = hit.profile
        if self.swap((p.host, "section"), slug) != slug:
            section = p.sections.get(slug)
            self.emit(hit.action("section", BEHAVIORAL, section.title if section else slug,
                                 [section.concept] if section else [], section=slug))

    def latest(self) -> Action | None:
        """The latest action that is not a scroll (trackers flush impressions at any moment) nor text
        in a page's extra parameters (it comes with the page's own action)."""
        return next((a for a in reversed(self.actions) if a.what not in ("scroll", "url_text")), None)

    def typing(self) -> Action | None:
        """The latest action when it is text typed but not yet submitted (suggest requests, keystrokes)."""
        last = self.latest()
        return last if last and last.what == "suggest" else None

    def absorb_typing(self, search: Action) -> None:
        """Typed, then submitted: one action; the typing's requests and beacons become the search's
        evidence. A search for one of the suggestions the site offered, longer than what was typed, was
        chosen, not typed: the typing stays content of its own, the search becomes a behavioral
        `suggestion` (its text is the site's)."""
        typed = self.typing()
        query = search.text.lower().strip()
        if typed and query in self.offered and len(query) > len(typed.text.strip()):
            search.kind, search.what, search.channel, search.sent = "select", "suggestion", BEHAVIORAL, []
            search.detail["typed"] = typed.text
            self.prefix_of[id(search)] = typed
            return
        if typed and search.text.lower().startswith(typed.text.lower()):
            self.actions.remove(typed)
            search.kind = "type"
            search.evidence = sorted({*typed.evidence, search.seq})
            search.observers = list(dict.fromkeys([*search.observers, *typed.observers]))

    def suggest(self, hit: Hit) -> None:
        """Text typed into a search box: a run of requests each extending or trimming the last is one action."""
        text = " ".join(hit.values([hit.profile.grammar.suggest_param]))
        self.suggest_requests.add(hit.record["seq"])
        if text:
            self.typed(text, hit.record["seq"], hit.record["url"], hit.profile.host)

    def typed(self, text: str, seq: int, url: str, observer: str) -> None:
        last = self.typing()
        if last and (text.lower().startswith(last.text.lower()) or last.text.lower().startswith(text.lower())):
            last.evidence = sorted({*last.evidence, seq})
            if observer not in last.observers:
                last.observers.append(observer)
            if len(text) > len(last.text):
                last.text, last.sent, last.seq, last.url = text, self.decoded(text), seq, url
            return
        self.emit(Action("type", "suggest", CONTENT, text, seq, url, [observer], sent=self.decoded(text)))

    # --- forms ------------------------------------------------------------------------------

    def form(self, record: dict) -> None:
        parts = urlsplit(record["url"])
        profile = self.site(parts.hostname)
        if profile is None:
            return
        g = profile.grammar
        given = dict(record["fields"])
        base = dict(seq=record["request"], url=record["url"], observers=[profile.host],
                    evidence=[record["request"], record["seq"]])
        if re.fullmatch(g.cart_add_path, parts.path):
            pid = product_id(given.get(g.product_field, ""))
            product = profile.products.get(pid) if isinstance(pid, int) else None
            self.emit(Action("submit", "add_to_cart", BEHAVIORAL, product.title if product else str(pid),
                             detail={"product": pid}, concepts=list(product.concepts) if product else [], **base))
            return
        detail = {"fields": record["fields"]}
        known = g.form(parts.path)
        what = FORM_WHAT.get(known[0], "form") if known else "form"
        if known:
            detail["form"] = known[0]
        pid = (known[1] if known else None) or given.get(g.product_field)
        product = None
        if pid:
            detail["product"] = product_id(pid)
            product = profile.products.get(detail["product"]) if isinstance(detail["product"], int) else None
        if what in BEHAVIORAL_FORMS:
            label = " ".join(v for k, v in record["fields"] if k != g.product_field and v.strip())
            title = product.title if product else str(pid or "")
            action = Action("submit", what, BEHAVIORAL, f"{title} ({label})" if label else title, detail=detail,
                            concepts=list(product.concepts) if product else [], **base)
            self.join_fields(action, record["fields"])
            self.emit(action)
            return
        values = [v for k, v in record["fields"] if k != g.product_field and v.strip()]
        sent = [t for v in values for t in self.decoded(v)]
        action = Action("submit", what, CONTENT, " ".join(values), detail=detail, sent=sent, **base)
        self.join_fields(action, record["fields"])
        self.emit(action)

    def join_fields(self, action: Action, fields: list) -> None:
        """Field values a tracker saw typed that the submitted form carries: the same words, one more observer."""
        submitted = {(k, v) for k, v in fields}
        for beacon in [b for b in self.fields if (b["data"].get("name"), b["data"].get("value")) in submitted]:
            self.fields.remove(beacon)
            fold(action, beacon["seq"], urlsplit(beacon["url"]).hostname or "")

    # --- beacons ----------------------------------------------------------------------------

    def beacon(self, record: dict) -> None:
        data = record["data"] if isinstance(record.get("data"), dict) else {}
        event, observer = record["event"], urlsplit(record["url"]).hostname or ""
        if event in ("click", "view", "submit"):
            if event == "view":
                self.on_load.setdefault(str(data.get("page", "")), set()).update(str(v) for v in data.get("seen") or ())
            else:
                self.page_told(record["seq"], str(data.get("page") or ""), observer)
            self.arrive(Pending.of(record, data, observer))
        elif event == "keys":
            for value in versions(data.get("entries")):
                self.keys(value, record, observer)
        elif event == "field" and data.get("action") == "change" and str(data.get("value") or "").strip():
            self.fields.append(record)
        elif event in ("scroll", "impression"):
            self.seen(record, data, observer)

    def page_told(self, seq: int, page: str, observer: str) -> None:
        """A click or submit beacon names the page it came from: its receiver learns that page's URL
        (a search's query with it), so it observes the action that loaded the page."""
        loaded = self.by_url.get(normalised_url(page)) if page else None
        if loaded is not None and 0 <= seq - loaded.seq <= WINDOW:
            fold(loaded, seq, observer)

    def keys(self, value: str, record: dict, observer: str) -> None:
        """Keystrokes in a search box: the typing or the search they belong to, else text typed and left."""
        recent = self.latest()
        if recent and recent.what == "search" and recent.text.lower().startswith(value.lower()):
            fold(recent, record["seq"], observer)
            recent.kind = "type"
            return
        prefix = self.prefix_of.get(id(recent)) if recent else None
        if prefix and related(prefix.text, value):  # what was typed before a suggestion was chosen
            fold(prefix, record["seq"], observer)
            return
        self.typed(value, record["seq"], str((record.get("data") or {}).get("page", "")), observer)

    def seen(self, record: dict, data: dict, observer: str) -> None:
        """Scroll depth and impressions of one page, until another action comes between, are one scroll;
        an item already in view when the page loaded is marked `initial`."""
        page = str(data.get("page", ""))
        profile = self.site(urlsplit(page).hostname)
        items = [i for i in data.get("items") or () if isinstance(i, dict)]
        items += [{"kind": "product", "id": str(pid), "ms": 0} for pid in data.get("products") or ()]
        items += [{"kind": "product" if str(v).isdigit() else "section", "id": str(v), "ms": 0}
                  for v in data.get("seen") or ()]  # a scroll beacon names what is in view, without dwell
        current = self.scrolling
        if current is None or current is not (self.actions[-1] if self.actions else None) or current.url != page:
            current = Action("scroll", "scroll", BEHAVIORAL, "", record["seq"], page, [observer],
                             detail={"seen": []})
            self.emit(current)
            self.scrolling = current
        fold(current, record["seq"], observer)
        if data.get("depth") is not None:
            current.detail["depth"] = max(current.detail.get("depth", 0), data["depth"])
        merged = {(i["kind"], i["id"]): i for i in current.detail["seen"]}
        for item in items:
            key = (str(item.get("kind")), str(item.get("id")))
            ms = item.get("ms") if isinstance(item.get("ms"), (int, float)) else 0
            if key in merged:
                merged[key]["ms"] += ms
            else:
                merged[key] = {"kind": key[0], "id": key[1], "ms": ms,
                               **({"initial": True} if key[1] in self.on_load.get(page, ()) else {})}
                current.concepts += [c for c in self.concepts_of(profile, *key) if c not in current.concepts]
        current.detail["seen"] = list(merged.values())
        current.text = ", ".join(f"{k}:{i}" for k, i in merged)[:500]

    @staticmethod
    def concepts_of(profile: SiteProfile | None, kind: str, ident: str) -> list[str]:
        if profile is None:
            return []
        if kind == "product" and ident.isdigit() and int(ident) in profile.products:
            return list(profile.products[int(ident)].concepts)
        if kind == "section" and ident in profile.sections:
            return [profile.sections[ident].concept] if profile.sections[ident].concept else []
        return []

    def emit(self, action: Action) -> None:
        action.evidence = sorted({*action.evidence, action.seq})
        self.actions.append(action)
        if action.what not in ("scroll", "click"):
            self.by_url[normalised_url(action.url)] = action
            self.resolve(action)

    def arrive(self, beacon: "Pending") -> None:
        """A page view joins the action that loaded its page; a click or submit waits for the action
        it causes (a link clicked may lead back to a page seen before)."""
        before = self.earlier(beacon) if beacon.event == "view" else None
        if before is not None:
            self.join(before, beacon)
        else:
            self.pending.append(beacon)

    def earlier(self, beacon: "Pending") -> Action | None:
        """The latest action at the beacon's URL, when it came at most WINDOW records before it."""
        before = self.by_url.get(beacon.url) if beacon.url else None
        return before if before is not None and 0 <= beacon.seq - before.seq <= WINDOW else None

    def resolve(self, action: Action) -> None:
        """Waiting beacons that `action` answers: buttons and submits before it, links and views to its URL."""
        url, path = normalised_url(action.url), action.url.split("?")[0]
        for beacon in [b for b in self.pending if b.seq < action.seq or b.url == url]:
            if beacon.url is None or (beacon.event == "submit" and beacon.url.split("?")[0] == path) \
                    or (beacon.event != "submit" and beacon.url == url):
                self.pending.remove(beacon)
                self.join(action, beacon)

    def join(self, action: Action, beacon: "Pending") -> None:
        if beacon.event == "click":
            self.clicked(action, beacon.label)
        fold(action, beacon.seq, beacon.observer)

    def expire(self, before: int) -> None:
        """Beacons and field values older than `before` that nothing claimed become actions of their own."""
        while self.pending and self.pending[0].seq < before:
            beacon = self.pending.popleft()
            earlier = self.earlier(beacon) if beacon.event == "click" else None
            if earlier is not None:  # the request went out before its click was reported
                self.join(earlier, beacon)
            elif beacon.event == "click":
                self.lone_click(beacon)
        while self.fields and self.fields[0]["seq"] < before:
            self.lone_field(self.fields.popleft())

    def lone_click(self, beacon: "Pending") -> None:
        """A click that caused no request: an action, which the same click reported to another observer joins."""
        same = self.own_clicks.get(beacon.key)
        if same is not None and beacon.observer not in same.observers and beacon.seq - same.seq <= WINDOW:
            fold(same, beacon.seq, beacon.observer)
            return
        self.own_clicks[beacon.key] = Action("click", "click", BEHAVIORAL, beacon.label, beacon.seq, beacon.page,
                                             [beacon.observer], evidence=[beacon.seq], detail=beacon.detail)
        self.actions.append(self.own_clicks[beacon.key])

    def lone_field(self, beacon: dict) -> None:
        """A field value no form carried: it joins a nearby content action that sent the same words
        (a search box), else it is text typed and left, seen by the tracker alone. A choice (a select,
        a checkbox, a radio button) is not text: see lone_choice."""
        data, observer = beacon["data"], urlsplit(beacon["url"]).hostname or ""
        if data.get("type") in CHOICE_FIELDS:
            self.lone_choice(beacon, data, observer)
            return
        value = str(data["value"]).lower()
        for action in reversed(self.actions):
            if action.seq < beacon["seq"] - WINDOW:
                break
            if action.channel == CONTENT and action.seq <= beacon["seq"] + WINDOW \
                    and any(value in t.lower() for t in (action.text, *action.sent)):
                fold(action, beacon["seq"], observer)
                return
        self.actions.append(Action("type", "field", CONTENT, str(data["value"]), beacon["seq"],
                                   str(data.get("page") or data.get("form") or ""), [observer], evidence=[beacon["seq"]],
                                   detail={"field": data.get("name"), "form": data.get("form")},
                                   sent=self.decoded(str(data["value"]))))

    def lone_choice(self, beacon: dict, data: dict, observer: str) -> None:
        """A choice a tracker saw made: it joins a nearby action whose URL or form carried the same
        name and value (a sort order submitted with its form), else it is a behavioral `choose` action,
        labelled by the field's label and the value chosen."""
        name, value = str(data.get("name") or ""), str(data["value"])
        for action in reversed(self.actions):
            if action.seq < beacon["seq"] - WINDOW:
                break
            if action.seq <= beacon["seq"] + WINDOW and carries(action, name, value):
                fold(action, beacon["seq"], observer)
                return
        label = str(data.get("label") or name)
        self.actions.append(Action("select", "choose", BEHAVIORAL, f"{label}: {value}" if label else value,
                                   beacon["seq"], str(data.get("page") or ""), [observer], evidence=[beacon["seq"]],
                                   detail={"field": name, "value": value}))

    # --- the end ----------------------------------------------------------------------------

    def finish(self) -> list[Action]:
        """All actions in traffic order, every beacon still waiting settled (rules in docs/AUDIT.md):
        a click whose `href` is an action's URL is part of it (a facet click makes it a `select`);
        a button click or a tracker's `submit` is part of the next action; a click that caused no
        request is an action of its own; a page view tells its observer about the action at its
        URL; a field value typed joins the content action that sent the same words, else it is a
        content action of its own."""
        self.expire(float("inf"))
        for action in self.actions:  # a page view can be reported after the first impressions
            if action.what == "scroll":
                for item in action.detail["seen"]:
                    if item["id"] in self.on_load.get(action.url, ()):
                        item["initial"] = True
        self.actions = [a for a in self.actions if a.what != "scroll" or scrolled(a)]
        return sorted(self.actions, key=lambda a: a.seq)

    @staticmethod
    def clicked(action: Action, label: str) -> None:
        """Record a click's label on the action it caused, and what gesture that makes it."""
        if label and label not in action.clicked:  # one click, reported to each observer
            action.clicked.append(label)
        if action.kind == "navigate":
            action.kind = "select" if action.what in ("filter", "unfilter", "sort") else "click"


def related(a: str, b: str) -> bool:
    """Whether one text extends the other (case aside)."""
    a, b = a.lower(), b.lower()
    return a.startswith(b) or b.startswith(a)


def suggestions(body: bytes) -> set[str]:
    """Every string of an autocomplete answer (JSON), lower case: the suggestions it offered."""
    try:
        doc = json.loads(body[:MAX_SUGGESTIONS].decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return set()
    return {s.lower().strip() for s in json_strings(doc) if s.strip()}


def versions(entries) -> list[str]:
    """The texts a keystroke beacon's entries show typed: each value the typing went back from (a
    deletion, a rewrite) and the last one. A query typed, revised and resubmitted keeps its first
    version."""
    values = [e["value"] for e in entries or () if isinstance(e, dict) and isinstance(e.get("value"), str)]
    kept = [v for v, after in zip(values, values[1:]) if not after.startswith(v)] + values[-1:]
    return [v for v in kept if v.strip()]


def carries(action: Action, name: str, value: str) -> bool:
    """Whether `action`'s URL query or submitted form has `name` = `value`."""
    query = parse_qs(urlsplit(action.url).query, keep_blank_values=True)
    fields = action.detail.get("fields") or () if isinstance(action.detail, dict) else ()
    return value in query.get(name, ()) or [name, value] in [list(f) for f in fields]


def path_words(record: dict, path: str) -> list[str]:
    """Words joined in a path segment (`/i-am-divorced`) of a GET for a page, read as text; never for
    what the browser fetches as part of a page (its Sec-Fetch-Dest) or a static file."""
    if header(record, "sec-fetch-dest").lower() in SUBRESOURCES or STATIC_FILE.fullmatch(path):
        return []
    words = [re.sub(r"[-_+]", " ", unquote(s)) for s in path.split("/") if PATH_WORDS.fullmatch(unquote(s))]
    return [w for w in words if WORD.search(w)]


def scrolled(action: Action) -> bool:
    """Whether a scroll action saw the agent scroll: a depth was reported, or something came into
    view that was not there when the page loaded (impressions flush whether or not anyone scrolls)."""
    return "depth" in action.detail or any(not i.get("initial") for i in action.detail.get("seen", ()))


def fold(action: Action, seq: int, observer: str) -> None:
    """Add a record to the evidence of `action`, and its receiver to the observers."""
    action.evidence = sorted({*action.evidence, seq})
    if observer and observer not in action.observers:
        action.observers.append(observer)
