"""Reconstruct what the agent did from captured traffic alone, using what each site knows of itself.

Feed capture records in order to `ActionBuilder.add`; `finish()` returns the actions. The rules
(one gesture is one action, what merges, who observed what) are in docs/AUDIT.md.
"""

import re
from collections import Counter
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs
from urllib.parse import urlsplit

from spillage.audit.model import BEHAVIORAL
from spillage.audit.model import CONTENT
from spillage.audit.model import Action
from spillage.audit.model import Placed
from spillage.audit.page_labels import PageLabels
from spillage.audit.riding import Riders
from spillage.audit.riding import Waiting
from spillage.audit.riding import beacon_own
from spillage.audit.riding import content_piece
from spillage.audit.riding import content_pieces
from spillage.audit.riding import incidental
from spillage.audit.riding import has_words
from spillage.audit.riding import is_name
from spillage.audit.riding import page_of
from spillage.proxy.beacons import DEFAULT_BEACON_URLS
from spillage.proxy.beacons import SITE
from spillage.proxy.beacons import beacon_field_role
from spillage.proxy.beacons import beacon_target
from spillage.proxy.beacons import endpoints
from spillage.proxy.capturelog import read_body
from spillage.proxy.hosts import background_reason
from spillage.proxy.reading.decode import json_walk
from spillage.proxy.reading.decode import parse_json
from spillage.proxy.reading.decode import texts as decoded_texts
from spillage.proxy.reading.decode import unquote_site
from spillage.proxy.reading.request import Piece
from spillage.proxy.reading.request import Reading
from spillage.proxy.reading.streams import SHORT
from spillage.proxy.reading.streams import Streams
from spillage.proxy.reading.request import joined
from spillage.proxy.reading.request import WireRequest
from spillage.origins.grammar import path_id
from spillage.origins.knowledge import SiteProfile
from spillage.origins.knowledge import profile_for

FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
TOLD_PAGES = ("body:json:$.page", "body:json:$.ref")   # an event's page and referrer
MAX_REQUESTED = 100_000   # page URLs remembered, to tell a page an event names from one never asked for
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
GLANCE_MS = 300  # on screen this briefly, right before a click: scrolled into view to be clicked, not by the agent
WINDOW = 400  # records within which a beacon and the request it belongs to arrive (bounds memory)
REFUSED = "refused:"  # observer prefix of a host the proxy refused (it would have seen the request)
# Event endpoints whose requests the proxy also records as beacons (a log's session_start says which).


def normalised_url(url: str) -> str:
    """A URL without its fragment, for matching a click's href to the request it caused."""
    return url.split("#", 1)[0]


def header(record: dict, name: str) -> str:
    """The first value of a header of a request record, lower-cased name match."""
    return next((v for k, v in record.get("headers") or () if k.lower() == name), "")


@dataclass
class Hit:
    """A request to a site being read: its record, its site, its path (as the site decodes it) and
    query parameters, and who saw it (the site, or `refused:<host>` when the proxy refused it)."""

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

    def authored(self, text: str, **detail) -> Action:
        """Words the agent wrote into a URL it built: a department, facet or section the site's catalog
        does not have (no page of the site links it), read as text the agent sent."""
        words = re.sub(r"[-_+]+", " ", text).strip()
        return self.action("url_text", CONTENT, words, sent=[words], **detail)

    def knows(self, kind: str, slug: str) -> bool:
        """Whether the site has this department, facet or section, or its catalog is unknown (a site we
        only have the URL grammar of: what it offers cannot be told from what an agent made up)."""
        p = self.profile
        return not p.products or slug in {"category": p.categories, "facet": p.facets, "section": p.sections}[kind]

    def own(self, piece) -> bool:
        """Whether a piece is what the grammar reads of this page: its path, and its parameters'
        values and the names of those it reads (any other value is `url_text`, its own action)."""
        where = piece.where
        if where.startswith(("path[", "query:")):
            return True
        return where == "query-name" and self.profile.grammar.reads(piece.text)

    def typed(self, piece) -> bool:
        """Whether a piece is text typed into this page's URL: its query, or a parameter the grammar
        does not read (a facet or a sort is chosen, not typed)."""
        if not piece.where.startswith("query:"):
            return False
        g, name = self.profile.grammar, piece.where[len("query:"):]
        return name in (*g.query_params, *g.product_query_params, g.suggest_param) or not g.reads(name)


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
    typed: tuple[str, ...] = ()   # a submit's field values, as the tracker saw them

    @property
    def key(self) -> tuple:
        return (self.page, self.label, self.url)

    @classmethod
    def of(cls, record: dict, data: dict, observer: str) -> "Pending":
        event = record["event"]
        url = data.get("href") if event == "click" else data.get("action") if event == "submit" else data.get("page")
        fields = data.get("fields") if event == "submit" and isinstance(data.get("fields"), list) else ()
        return cls(record["seq"], event, observer, normalised_url(str(url)) if url else None,
                   str(data.get("label") or "") if event == "click" else "", str(data.get("page", "")),
                   {k: data[k] for k in ("product", "facet", "section") if data.get(k)},
                   tuple(str(f[1]) for f in fields if isinstance(f, list) and len(f) == 2 and str(f[1]).strip()))


class ActionBuilder:
    """Feed capture records in order; `finish()` returns the actions."""

    def __init__(self, profiles: dict[str, SiteProfile], session_dir: Path | None = None, every_request: bool = False):
        """`every_request`: a request that makes no action and joins none is an action of its own even
        when its only text is its envelope (the guard reads each request alone)."""
        self.profiles = profiles
        self.every_request = every_request
        self.session_dir = session_dir
        self.actions: list[Action] = []
        self.last: dict[tuple, object] = {}   # what a listing, product or section page last showed
        self.pending: deque[Pending] = deque()  # click, view and submit beacons waiting for their action
        self.by_url: dict[str, Action] = {}     # the latest action per URL, for beacons that come after it
        self.own_clicks: dict[tuple, Action] = {}  # click actions that caused no request, by (page, label, href)
        self.fields: deque[dict] = deque()      # field values a tracker saw typed, waiting for a form
        self.scrolling: Action | None = None  # the scroll action that impressions still join
        self.scroll_of: dict[str, Action] = {}  # page → the scroll of its visit, which its dwell flushed late joins
        self.beacon_urls = endpoints(DEFAULT_BEACON_URLS)
        self.on_load: dict[str, set[str]] = {}  # page URL → the products and sections in view as it loaded
        self.sites: dict[str, SiteProfile | None] = {}  # host → its site's profile, as found
        self.suggest_requests: set[int] = set()  # seqs of autocomplete requests, whose answers we read
        self.offered: set[str] = set()           # suggestions the sites offered (lower case)
        self.prefix_of: dict[int, Action] = {}   # id() of a chosen suggestion → the typing that led to it
        self.readings: dict[int, Reading] = {}   # request seq → its reading, given (the guard) or made here
        self.hosts: dict[int, str] = {}          # request seq → its host, for the cookies its response sets
        self.unclaimed: list[Waiting] = []       # what requests carried before any action was made
        self.beacon_of: dict[int, int] = {}      # an event endpoint's request seq → its `beacon` record's seq
        self.streams = Streams()                 # short values sent one after another, per place
        self.requested: set[str] = set()         # the URLs the session's GETs asked for
        self.shown = ""                          # the page the tracker last heard was loaded
        self.viewed: set[str] = set()            # pages whose view said what was in view as they loaded
        self.browser_background: Counter = Counter()   # the browser's own requests, by why it made them
        self.riders = Riders({p.host for p in profiles.values()} | {t.partition("/")[0] for t in self.beacon_urls})
        self.page_labels = PageLabels()

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
            self.riders.known_hosts |= {t.partition("/")[0] for t in self.beacon_urls}
        elif kind == "request":
            self.request(record)
        elif kind == "response":
            host = self.hosts.pop(record.get("request"), "")
            self.riders.response(host, record.get("headers"))
            if self.session_dir and PageLabels.reads(profile := self.site(host)):
                self.page_labels.learn(profile, record.get("headers"), read_body(self.session_dir, record.get("body")))
            if record.get("request") in self.suggest_requests:
                self.offered |= suggestions(read_body(self.session_dir, record.get("body")) if self.session_dir else b"")
        elif kind == "form":
            self.form(record)
        elif kind == "beacon":
            self.beacon(record)
        elif kind == "egress_blocked":
            reason = self.background(record)
            if reason:
                self.browser_background[reason] += 1
            else:
                self.refused(record)

    @staticmethod
    def background(record: dict) -> str | None:
        """Why a request is the browser's own (proxy/hosts.py), or None: a refused one the proxy marked,
        and any whose host and path the list names, also in a log recorded before the list knew them."""
        url = str(record.get("url") or "")
        path = "/" + url.split("//", 1)[-1].partition("/")[2] if "//" in url else None
        host = str(record.get("host") or "") or (url.split("//", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0])
        reason = background_reason(host, path)
        if reason is None and record.get("background"):
            reason = str(record.get("reason") or "").partition("(")[2].rstrip(")") or "browser"
        return reason

    def swap(self, key: tuple, value):
        """Remember `value` under `key`; the value remembered before."""
        before = self.last.get(key)
        self.last[key] = value
        return before

    # --- requests ---------------------------------------------------------------------------

    def reading(self, record: dict) -> Reading:
        """The observer's view of a request record (proxy/reading/), made once."""
        seq = record["seq"]
        if seq not in self.readings:
            self.readings[seq] = Reading(WireRequest.of_record(record, self.session_dir))
        return self.readings[seq]

    def request(self, record: dict) -> None:
        """A request: the gesture its site's grammar reads in it (if any), and what rides along."""
        if reason := self.background(record):
            self.browser_background[reason] += 1   # the browser's own, never a gesture nor text of the agent
            return
        reading = self.reading(record)
        seq = record["seq"]
        self.hosts[seq] = reading.host
        if record["method"] == "GET" and len(self.requested) < MAX_REQUESTED:
            self.requested.add(normalised_url(record["url"]))
        self.forget(seq - WINDOW)
        made = len(self.actions)
        beacon = beacon_target(record["url"]) in self.beacon_urls
        if beacon:
            event = reading.beacon()[0]
            own = self.beacon_reads(event)   # its `beacon` record tells what was seen
            typed = lambda piece: piece.where.startswith(("query:", "body:json:"))  # noqa: E731 - a seam across any two values
        else:
            own, typed = self.read_request(record, reading)
        riding = self.riders.pieces(seq, reading, own, self.named_action)
        values = [p for p in reading.pieces if typed(p)]
        seams = joined(values, "joined")
        if beacon:   # the values of what was typed, next to each other too (a form's fields, without their names)
            seams += joined([p for p in values if beacon_role(event, p) != SITE], "joined")
        riding += [Placed(seq, p, own=False, observers=(reading.host,)) for p in seams + self.runs(reading)]
        made = [a for a in self.actions[made:] if seq in a.evidence]
        for action in made:
            action.carried([Placed(seq, p) for p in reading.pieces if own(p) and has_words(p)])
        if made:
            made[0].carried(riding)
        else:
            self.riders.wait(Waiting(seq, record["url"], reading.host, page_of(reading), riding))

    def read_request(self, record: dict, reading: Reading):
        """Make the actions of a request to a site; (which pieces they read, which of those were typed)."""
        nothing = lambda piece: False  # noqa: E731
        profile = self.site(reading.host)
        if profile is None:
            return nothing, nothing
        if record["method"] != "GET" and reading.media[0] in FORM_TYPES:
            form = lambda piece: piece.where.startswith(("path[", "query:", "body:form:", "body:part"))  # noqa: E731
            return form, lambda piece: piece.where.startswith(("body:form:", "body:part:"))   # its `form` record
        if record["method"] != "GET":
            self.free_text(record, reading, profile.host, "submit")  # JSON, text, ...: forms come as `form`
            return content_piece, nothing
        hit = Hit(record, profile, reading.path, reading.param_values(), profile.host)
        if self.page(hit):
            return hit.own, hit.typed
        if reading.params:
            self.free_text(record, reading, profile.host, "navigate")
            return content_piece, nothing
        if words := path_words(record, reading.path):
            self.emit(Action("navigate", "navigate", CONTENT, " | ".join(words)[:500], record["seq"], record["url"],
                             [profile.host], sent=words))
            return (lambda piece: piece.where.startswith("path[")), nothing
        return nothing, nothing

    def beacon_reads(self, event: str):
        """Which pieces of an event's request its `beacon` record accounts for: the tracker's schema,
        but for a page (`page`, `ref`) no request of the session asked for, which tells the tracker a
        URL of its own: its text rides along."""
        schema = beacon_own(event)

        def own(piece) -> bool:
            if piece.where in TOLD_PAGES and piece.raw and not piece.decodings[1:]:
                return normalised_url(piece.raw) in self.requested
            return schema(piece)
        return own

    def runs(self, reading: Reading) -> list[Piece]:
        """Text sent piecemeal (proxy/reading/streams.py), as the runs this request continues."""
        return [p for p in self.streams.feed(reading, lambda p: not is_name(p.where)) if has_words(p)]

    def named_action(self, url: str) -> Action | None:
        """The earlier action at the page `url` names (a Referer, an Origin), if any."""
        return self.by_url.get(normalised_url(url)) if url else None

    def forget(self, before: int) -> None:
        """Drop what is kept of requests older than `before`: nothing comes back for them."""
        for kept in (self.readings, self.hosts, self.beacon_of):
            for seq in [s for s in kept if s < before]:
                del kept[seq]

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
        elif (m := re.fullmatch(g.product_path, hit.path)) and (pid := g.product(path_id(m))) is not None:
            self.product_page(hit, pid, m.groupdict().get("title"))
        elif m := re.fullmatch(g.section_path, hit.path):
            self.section_page(hit, path_id(m))
        elif re.fullmatch(g.suggest_path, hit.path):
            self.suggest(hit)
        else:
            return False
        return True

    @staticmethod
    def words_sent(record: dict, reading: Reading) -> tuple[list[str], list[Placed]]:
        """The decoded texts a request carried as content that hold words (not bare numbers or ids),
        and where each was."""
        placed = [Placed(record["seq"], p) for p in content_pieces(reading) if has_words(p)]
        return list(dict.fromkeys(p.text for p in placed)), placed

    def free_text(self, record: dict, reading: Reading, observer: str, kind: str) -> None:
        """A request that is no page of the site but carries text: content, whatever it says."""
        sent, placed = self.words_sent(record, reading)
        if sent:
            action = Action(kind, "post" if kind == "submit" else "navigate", CONTENT, " | ".join(sent)[:500],
                            record["seq"], record["url"], [observer], sent=sent)
            action.carried(placed)
            self.emit(action)

    def refused(self, record: dict) -> None:
        """An agent request the proxy refused: its host would have seen it (a search engine, say).
        A page of a site we have a profile for (a search on amazon.com over plain HTTP) is read as
        that page, observed by the refused host; anything else is a `navigate`."""
        reading = self.reading(record)
        host = record.get("host") or reading.host
        profile = self.site(host) if record["method"] == "GET" else None
        if profile is not None and self.page(Hit(record, profile, reading.path, reading.param_values(), REFUSED + host)):
            return
        sent, placed = self.words_sent(record, reading)
        action = Action("navigate", "navigate", CONTENT if sent else BEHAVIORAL, " | ".join(sent)[:500] or host,
                        record["seq"], record["url"], [REFUSED + host], sent=sent, detail={"refused": host})
        action.carried(placed)
        self.emit(action)

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
                                 category=category) if hit.knows("category", category) else hit.authored(category, category=category))
        for slug in sorted(facets - b_facets):
            facet = p.facets.get(slug)
            self.emit(hit.action("filter", BEHAVIORAL, facet.label if facet else self.facet_label(p, slug),
                                 [facet.concept] if facet else [], facet=slug)
                      if hit.knows("facet", slug) else hit.authored(self.facet_label(p, slug), facet=slug))
        same_search = before is not None and query == b_query  # a new query starts afresh
        for slug in sorted(b_facets - facets) if same_search else ():
            facet = p.facets.get(slug)
            self.emit(hit.action("unfilter", BEHAVIORAL, facet.label if facet else self.facet_label(p, slug), facet=slug))
        if same_search and sort != b_sort:
            self.emit(hit.action("sort", BEHAVIORAL, sort or "default", sort=sort))
        if before and page != b_page and (query, category, facets, sort) == (b_query, b_category, b_facets, b_sort):
            self.emit(hit.action("paginate", BEHAVIORAL, f"page {page}", page=page))

    @staticmethod
    def decoded(text: str) -> list[str]:
        return [t for t in decoded_texts(text) if t]

    def facet_label(self, p: SiteProfile, slug: str) -> str:
        """A facet the catalog does not know: as a page of the site named it, else by the grammar."""
        return self.page_labels.label(p, "facet", slug) or p.grammar.facet_label(slug)

    def product_page(self, hit: Hit, pid: int | str, title: str | None = None) -> None:
        """A product page is a view unless it is the product last viewed; text searched on it is a search.
        A product the catalog does not know is labelled as a page of the site showed it, else by the
        title in its URL, if any."""
        p = hit.profile
        if self.swap((p.host, "product"), pid) != pid:
            product = p.products.get(pid)
            label = product.title if product else (self.page_labels.label(p, "product", pid)
                                                   or (title or "").replace("-", " "))
            self.emit(hit.action("view_product", BEHAVIORAL, label or f"product {pid}",
                                 product.concepts if product else (), product=pid))
        text = " ".join(hit.values(p.grammar.product_query_params))
        if text and self.swap((p.host, hit.path), text) != text:
            self.emit(hit.action("search", CONTENT, text, sent=self.decoded(text), product=pid))

    def section_page(self, hit: Hit, slug: str) -> None:
        p = hit.profile
        if self.swap((p.host, "section"), slug) != slug:
            section = p.sections.get(slug)
            self.emit(hit.action("section", BEHAVIORAL, section.title if section else (
                                     self.page_labels.label(p, "section", slug) or slug),
                                 [section.concept] if section else [], section=slug)
                      if hit.knows("section", slug) else hit.authored(slug, section=slug))

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
        if last and len(text.strip()) <= SHORT and (len(last.text.strip()) <= SHORT or last.detail.get("piecemeal")) \
                and not related(text, last.text):
            last.text, last.sent = last.text + text, self.decoded(last.text + text)   # sent piecemeal: one text
            last.detail["piecemeal"] = True
            fold(last, seq, observer)
            return
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
        path = unquote_site(parts.path)
        given = dict(record["fields"])   # a field sent twice: the site reads the last
        base = dict(seq=record["request"], url=record["url"], observers=[profile.host],
                    evidence=[record["request"], record["seq"]])
        if re.fullmatch(g.cart_add_path, path):
            pid = read_id(g, given.get(g.product_field, ""), in_form=True)
            product = profile.products.get(pid) if isinstance(pid, int) else None
            self.emit(Action("submit", "add_to_cart", BEHAVIORAL, product.title if product else str(pid),
                             detail={"product": pid}, concepts=list(product.concepts) if product else [], **base))
            return
        detail = {"fields": record["fields"]}
        known = g.form(path)
        what = FORM_WHAT.get(known[0], "form") if known else "form"
        if known:
            detail["form"] = known[0]
        pid = read_id(g, known[1]) if known and known[1] else None
        if pid is None and given.get(g.product_field):
            pid = read_id(g, given[g.product_field], in_form=True)
        product = None
        if pid:
            detail["product"] = pid
            product = profile.products.get(detail["product"]) if isinstance(detail["product"], int) else None
        if what in BEHAVIORAL_FORMS:
            label = " ".join(v for k, v in record["fields"] if k != g.product_field and v.strip())
            title = product.title if product else str(pid or "")
            action = Action("submit", what, BEHAVIORAL, f"{title} ({label})" if label else title, detail=detail,
                            concepts=list(product.concepts) if product else [], **base)
            self.join_fields(action, record["fields"])
            self.emit(action)
            return
        if product is not None and self.last.get((profile.host, "product")) != pid:
            detail["about"] = product.title   # a question or offer about a product not in view chose it, too
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
        if isinstance(record.get("request"), int):
            self.beacon_of[record["request"]] = record["seq"]
        data = record["data"] if isinstance(record.get("data"), dict) else {}
        event, observer = record["event"], urlsplit(record["url"]).hostname or ""
        if event in ("click", "view", "submit"):
            if event == "view":
                self.on_load.setdefault(str(data.get("page", "")), set()).update(str(v) for v in data.get("seen") or ())
                if isinstance(data.get("seen"), list):   # the tracker's view; the site's own names nothing in view
                    self.shown = str(data.get("page", ""))
                    self.viewed.add(self.shown)
                    self.scroll_of.pop(self.shown, None)   # a new visit
                self.told_page(record["seq"], str(data.get("page") or ""), observer)
            else:
                self.page_told(record["seq"], str(data.get("page") or ""), observer)
            self.arrive(Pending.of(record, data, observer))
        elif event == "keys":
            for value in versions(data.get("entries")):
                self.keys(value, record, observer)
        elif event == "field" and data.get("action") != "blur" and str(data.get("value") or "").strip():
            if not any(b["data"].get("name") == data.get("name") and b["data"].get("value") == data.get("value")
                       for b in self.fields):   # focus, then change with what it already held: one value
                self.fields.append(record)
        elif event in ("scroll", "impression"):
            self.seen(record, data, observer)

    def told_page(self, seq: int, page: str, observer: str) -> None:
        """A page view for a page no request of the session asked for: the tracker was told of a page
        the site never served to this browser, and learns what it names (a product, a search), as if
        it had been loaded: the action is the tracker's alone."""
        if not page or self.named_action(page) is not None:
            return
        try:
            parts = urlsplit(page)
        except ValueError:
            return
        profile = self.site((parts.hostname or "").lower())
        if profile is not None:
            told = {"seq": seq, "url": page, "method": "GET", "headers": []}
            self.page(Hit(told, profile, unquote_site(parts.path or "/"), parse_qs(parts.query, keep_blank_values=True),
                          observer))

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
        an item already in view when the page loaded is marked `initial`. When the tracker hears of a
        page again after another one loaded (shown again from the browser's back-forward cache, which
        sends no page view), what its first event names was in view as it came back, and the position
        it came back at is no scroll. Dwell the tracker flushes as the page is left (after the click that
        leaves it) joins the scroll of that visit: it is time spent before the click, not a new scroll."""
        page = str(data.get("page", ""))
        profile = self.site(urlsplit(page).hostname)
        items = [i for i in data.get("items") or () if isinstance(i, dict)]
        items += [{"kind": "product", "id": str(pid), "ms": 0} for pid in data.get("products") or ()]
        items += [{"kind": "product" if str(v).isdigit() else "section", "id": str(v), "ms": 0}
                  for v in data.get("seen") or ()]  # a scroll beacon names what is in view, without dwell
        if page in self.viewed and page != self.shown:   # a page left, and shown again
            self.shown = page
            self.scroll_of.pop(page, None)
            self.on_load[page] = {*self.on_load.get(page, ()), *(str(i.get("id")) for i in items)}
            data = {k: v for k, v in data.items() if k != "depth"}
        current = self.scrolling
        if current is None or current is not (self.actions[-1] if self.actions else None) or current.url != page:
            late = page == self.shown and data.get("depth") is None and not data.get("seen")
            current = self.scroll_of.get(page) if late else None
            if current is None:
                current = Action("scroll", "scroll", BEHAVIORAL, "", record["seq"], page, [observer],
                                 detail={"seen": []})
                self.emit(current)
                self.scroll_of[page] = current
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
        action.carried(self.riders.claim(action.evidence))
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
        """The latest action at the beacon's URL (a submit's: at its form's path, as `resolve` matches it:
        a GET form's request carries the fields in its query), when it came at most WINDOW records before."""
        if beacon.event == "submit" and beacon.url:
            path = beacon.url.split("?")[0]
            before = next((a for a in reversed(self.actions) if a.what not in ("scroll", "click")
                           and a.url.split("?")[0] == path), None)
        else:
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
            earlier = self.earlier(beacon) if beacon.event in ("click", "submit") else None
            if earlier is not None:  # the request went out before its click or submit was reported
                self.join(earlier, beacon)
            elif beacon.event == "click":
                self.lone_click(beacon)
            elif beacon.event == "submit" and beacon.typed:
                self.lone_submit(beacon)
        while self.fields and self.fields[0]["seq"] < before:
            self.lone_field(self.fields.popleft())
        for waiting in self.riders.expired(before):
            self.ride(waiting)

    def holding(self, seq: int) -> Action | None:
        """The action the request `seq` (or the event its `beacon` record reports) became part of."""
        wanted = {seq, self.beacon_of.pop(seq, seq)}
        for action in reversed(self.actions):
            if action.seq < seq - WINDOW:
                return None
            if action.what != "scroll" and wanted & set(action.evidence):   # a scroll's text is its page's
                return action
        return None

    def ride(self, waiting: Waiting) -> None:
        """What a request carried besides any gesture joins the action of the page it came from, else
        the latest action before it, else an action of its own (docs/AUDIT.md)."""
        action = self.holding(waiting.seq) or self.named_action(waiting.page) or next(
            (a for a in reversed(self.actions) if a.seq <= waiting.seq and a.what != "scroll"), None) or next(
            (a for a in self.actions if a.what != "scroll"), None)
        if action is None:
            self.unclaimed.append(waiting)
        else:
            action.carried(waiting.placed)

    def lone_click(self, beacon: "Pending") -> None:
        """A click that caused no request: an action, which the same click reported to another observer joins."""
        same = self.own_clicks.get(beacon.key)
        if same is not None and beacon.observer not in same.observers and beacon.seq - same.seq <= WINDOW:
            fold(same, beacon.seq, beacon.observer)
            return
        self.own_clicks[beacon.key] = Action("click", "click", BEHAVIORAL, beacon.label, beacon.seq, beacon.page,
                                             [beacon.observer], evidence=[beacon.seq], detail=beacon.detail)
        self.actions.append(self.own_clicks[beacon.key])

    def lone_submit(self, beacon: Pending) -> None:
        """A form the tracker saw submitted that no request sent on (the page was left, or the site
        never got it): what it reported of the fields is content the tracker received."""
        sent = [t for value in beacon.typed for t in self.decoded(value)]
        self.actions.append(Action("submit", "form", CONTENT, " | ".join(beacon.typed)[:500], beacon.seq,
                                   beacon.url or beacon.page, [beacon.observer], evidence=[beacon.seq], sent=sent))

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
        carried = [w for w in self.unclaimed if self.every_request or not all(incidental(p) for p in w.placed)]
        if carried and not any(a.what != "scroll" for a in self.actions):
            first = carried[0]   # requests and nothing else: what they carried is an action of its own
            action = Action("navigate", "request", BEHAVIORAL, first.host, first.seq, first.url, [first.host],
                            evidence=[first.seq])
            action.carried([p for w in self.unclaimed for p in w.placed])
            self.actions.append(action)
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


def read_id(grammar, text: str, in_form: bool = False) -> int | str:
    """A product id as the site reads it (origins/routes.py), or the text sent when the site would
    refuse it (it then names no product of its catalog)."""
    pid = grammar.product(text, in_form)
    return text if pid is None else pid


def beacon_role(event: str, piece) -> str | None:
    """The role in the tracker's schema of a piece of an event's body (proxy/beacons.py)."""
    where = piece.where
    return beacon_field_role(event, where[len("body:json:"):]) if where.startswith("body:json:") else None


def related(a: str, b: str) -> bool:
    """Whether one text extends the other (case aside)."""
    a, b = a.lower(), b.lower()
    return a.startswith(b) or b.startswith(a)


def suggestions(body: bytes) -> set[str]:
    """Every string of an autocomplete answer (JSON), lower case: the suggestions it offered."""
    doc = parse_json(body[:MAX_SUGGESTIONS].decode("utf-8", "replace"))
    return {s.lower().strip() for _, s, key in json_walk(doc) if not key and s.strip()}


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
    words = [re.sub(r"[-_+]", " ", s) for s in path.split("/") if PATH_WORDS.fullmatch(s)]
    return [w for w in words if WORD.search(w)]


def scrolled(action: Action) -> bool:
    """Whether a scroll action saw the agent scroll: a depth was reported, or something came into
    view that was not there when the page loaded and stayed GLANCE_MS or more (impressions flush
    whether or not anyone scrolls; what a browser scrolls into view to click it is gone at once)."""
    return "depth" in action.detail or any(not i.get("initial") and i.get("ms", 0) >= GLANCE_MS
                                           for i in action.detail.get("seen", ()))


def fold(action: Action, seq: int, observer: str) -> None:
    """Add a record to the evidence of `action`, and its receiver to the observers."""
    action.evidence = sorted({*action.evidence, seq})
    if observer and observer not in action.observers:
        action.observers.append(observer)
