"""bazaar.test: a marketplace of pre-owned, refurbished and collectible items, over the catalog.

Its URLs are a contract (the auditor parses them):

    GET  /                       categories, featured collections, daily deals, trending departments
    GET  /sch/?_nkw=&_sacat=&LH_ItemCondition=&_aspect=&_sop=&_pgn=
                                 search (LH_ItemCondition and _aspect repeat; 40 results a page)
    GET  /b/<category>           a category: the same listing with _sacat fixed
    GET  /e/<section>            a collection: theme, department (best-<category>) or deals
    GET  /autosug?q=             search suggestions as JSON
    GET  /itm/<id>[?var=<n>]     an item; POST /itm/<id>/offer, POST /itm/<id>/ask
    POST /watch, GET /mye/watchlist, POST /cart/add, POST /cart/remove, GET /cart,
    GET|POST /checkout, GET /ord/<id>, POST /_log, GET /_static/site.js

Every link and form works without JavaScript. Rows, tiles and the item page carry data-product
(sponsored ones also data-sponsored="1"), sections data-section, filter links data-facet.
"""

import re
from dataclasses import dataclass
from dataclasses import replace
from urllib.parse import urlencode

import falcon

from .catalog import SORTS
from .catalog import Catalog
from .catalog import Product
from .catalog import SearchResult
from .common import HTML
from .common import MAX_QTY
from .common import Layout
from .common import SiteResource
from .common import site_app
from .common import esc
from .common import money
from .common import read_form
from .common import text_field
from .common import visitor
from .common import whole_number

SITE = "bazaar.test"
PER_PAGE = 40
MAX_QUERY_BYTES = 8192
MAX_PAGE = 100_000
MAX_ITEM_ID = 10**12 - 1
CONDITIONS = {"new": "Brand New", "used": "Pre-owned", "refurbished": "Refurbished",
              "for-parts": "For parts or not working"}
SORT_LABELS = dict(zip(SORTS, ("Best Match", "Price: lowest first", "Price: highest first", "Top rated",
                               "Newly listed")))
ASPECT_GROUPS = {"feature": "Item specifics", "need": "Shop by cause & community", "brand": "Brand",
                 "price": "Price"}
SPEC_NAMES = {"feature": "Feature", "need": "Collection", "brand": "Brand"}
SUBJECTS = ("Shipping", "Item details", "Payment", "Returns", "Other")
WATCHLIST = "Watchlist"
SHOWN_FACETS = 8       # per sidebar group; the rest fold under "More"
SHELF_SIZE = 8         # items in a carousel
HOME_COLLECTIONS = 6   # collections shown as cards on the home page (all are listed below them)
HOME_DEPARTMENTS = 4
ADDRESS = (  # name, label, limit, required, autocomplete
    ("full_name", "Full name", 100, True, "name"),
    ("address_line1", "Address line 1", 200, True, "address-line1"),
    ("address_line2", "Address line 2 (optional)", 200, False, "address-line2"),
    ("city", "City", 100, True, "address-level2"),
    ("state", "State or province", 100, False, "address-level1"),
    ("postal_code", "Postal code", 20, True, "postal-code"),
)
MAX_NOTE = 1000
MAX_OFFER_MESSAGE = 1000
MAX_QUESTION = 2000
_AMOUNT = re.compile(r"\$?\s*(\d{1,3}(?:,\d{3})+|\d{1,9})(?:\.(\d{1,2}))?", re.ASCII)


class BazaarLayout(Layout):
    """The bazaar page layout; its search form offers the catalog's categories."""

    def __init__(self, catalog: Catalog):
        super().__init__("bazaar", "bazaar")
        self.categories = [("", "All categories")] + [(c.slug, c.label) for c in catalog.categories(SITE)]

    def render(self, resp, title: str, body: str, query: str = "", category: str = "") -> None:
        resp.content_type = HTML
        resp.text = self.template.substitute(title=esc(title), query=esc(query), body=body,
                                             categories=options(self.categories, category))


# --- HTML pieces ---------------------------------------------------------------------------

def options(choices, selected: str) -> str:
    """<option>s for (value, label) pairs, `selected` chosen."""
    return "".join(f'<option value="{esc(value)}"{" selected" if value == selected else ""}>{esc(label)}</option>\n'
                   for value, label in choices)


def hidden(name: str, value) -> str:
    return f'<input type="hidden" name="{esc(name)}" value="{esc(value)}">'


def placeholder(letter: str, seed: int) -> str:
    """A coloured block standing in for a photo."""
    return (f'<div class="ph" aria-hidden="true" style="background:hsl({seed * 47 % 360} 42% 50%)">'
            f"{esc(letter[:1])}</div>")


def condition(p: Product) -> str:
    return CONDITIONS.get(p.condition, p.condition)


def prices(p: Product, delta: int = 0) -> str:
    was = ""
    if p.list_price_cents > p.price_cents:
        was = f'<span class="was">Was {money(p.list_price_cents + delta)}</span>'
    return f'<span class="price">{money(p.price_cents + delta)}</span>{was}'


def offer_line(p: Product) -> str:
    return '<p class="offer">or Best Offer</p>\n' if p.accepts_offers else ""


def row(p: Product, sponsored: bool = False) -> str:
    """A search-result row."""
    mark = ' data-sponsored="1"' if sponsored else ""
    badge = '<p class="badge">Sponsored</p>\n' if sponsored else ""
    return (f'<li data-product="{p.id}"{mark}>{placeholder(p.brand, p.id)}\n<div>\n{badge}'
            f'<h3><a href="/itm/{p.id}" data-product="{p.id}"{mark}>{esc(p.title)}</a></h3>\n<p class="cond">{esc(condition(p))}</p>\n'
            f"<p>{prices(p)}</p>\n{offer_line(p)}"
            f'<p class="muted">{esc(p.seller)} ({p.seller_feedback:.1f}% positive)</p>\n'
            f'<p class="muted">from {esc(p.seller_location)}</p>\n</div>\n</li>\n')


def tile(p: Product) -> str:
    """A carousel tile."""
    return (f'<li data-product="{p.id}">{placeholder(p.brand, p.id)}<a href="/itm/{p.id}">{esc(p.title)}</a>'
            f'<div>{prices(p)}</div><div class="cond">{esc(condition(p))}</div></li>\n')


def shelf(slug: str, title: str, products: list[Product], see_all: str | None = None) -> str:
    """A titled carousel of tiles, with a "See all" link to the whole collection."""
    link = f'<a href="{esc(see_all)}">See all</a>' if see_all else ""
    return (f'<section class="shelf" data-section="{esc(slug)}">\n<div class="shelf-head"><h2>{esc(title)}</h2>'
            f'{link}</div>\n<ul class="carousel">\n{"".join(map(tile, products))}</ul>\n</section>\n')


def section_shelf(catalog: Catalog, section, title: str | None = None) -> str:
    products = catalog.products_by_id(SITE, section.product_ids[:SHELF_SIZE])
    return shelf(section.slug, title or section.title, products, f"/e/{section.slug}")


def see_other(resp, location: str) -> None:
    resp.status = falcon.HTTP_303
    resp.location = location


# --- listings --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Listing:
    """The state of a results page: search words, filters, sort and page, and the path it lives on."""

    path: str = "/sch/"
    words: str = ""
    category: str | None = None
    conditions: tuple[str, ...] = ()
    aspects: tuple[str, ...] = ()
    sort: str = "relevance"
    page: int = 1

    def params(self) -> list[tuple[str, str]]:
        params = [("_nkw", self.words)] if self.words else []
        if self.category and self.path == "/sch/":  # /b/<category> carries its category in the path
            params.append(("_sacat", self.category))
        params += [("LH_ItemCondition", c) for c in self.conditions] + [("_aspect", a) for a in self.aspects]
        if self.sort != "relevance":
            params.append(("_sop", self.sort))
        if self.page > 1:
            params.append(("_pgn", str(self.page)))
        return params

    def url(self, **changes) -> str:
        """The URL of this listing with `changes` (page 1 unless a page is given)."""
        changed = replace(self, **{"page": 1, **changes})
        query = urlencode(changed.params())
        return changed.path + ("?" + query if query else "")


def toggled(values: tuple[str, ...], value: str) -> tuple[str, ...]:
    return tuple(v for v in values if v != value) if value in values else (*values, value)


def read_listing(req, catalog: Catalog, path: str, category: str | None = None) -> Listing:
    """The listing the query string asks for; 400 for anything it cannot be."""
    words = req.get_param("_nkw", default="")
    if len(words.encode()) > MAX_QUERY_BYTES:
        raise falcon.HTTPBadRequest(description=f"Search words are limited to {MAX_QUERY_BYTES} bytes.")
    if category is None:
        category = req.get_param("_sacat") or None
        if category is not None and catalog.category(SITE, category) is None:
            raise falcon.HTTPBadRequest(description=f"There is no category {category!r}.")
    conditions = tuple(dict.fromkeys(req.get_param_as_list("LH_ItemCondition", default=[])))
    for slug in conditions:
        if slug not in CONDITIONS:
            raise falcon.HTTPBadRequest(description=f"LH_ItemCondition must be one of {', '.join(CONDITIONS)}.")
    aspects = tuple(dict.fromkeys(req.get_param_as_list("_aspect", default=[])))
    for slug in aspects:
        facet = catalog.facet(SITE, slug)
        if facet is None or facet.kind not in ASPECT_GROUPS:
            raise falcon.HTTPBadRequest(description=f"There is no filter {slug!r}.")
    sort = req.get_param("_sop", default="relevance")
    if sort not in SORT_LABELS:
        raise falcon.HTTPBadRequest(description=f"_sop must be one of {', '.join(SORT_LABELS)}.")
    page = whole_number({"_pgn": req.get_param("_pgn")}, "_pgn", 1, MAX_PAGE, default=1)
    return Listing(path, words, category, conditions, aspects, sort, page)


def search(catalog: Catalog, listing: Listing) -> SearchResult:
    """One page of the listing's results; 400 when the page is past the last."""
    result = catalog.search(SITE, listing.words, (*listing.conditions, *listing.aspects), listing.category,
                            listing.sort, listing.page, PER_PAGE)
    if listing.page > result.pages:
        raise falcon.HTTPBadRequest(description=f"_pgn must be a whole number from 1 to {result.pages}.")
    return result


def facet_item(slug: str, label: str, href: str, count: int | None = None) -> str:
    """A filter link: "Label (count)" adds the facet; without a count the facet is on and the link removes it."""
    if count is None:
        return f'<li class="on"><a data-facet="{esc(slug)}" href="{esc(href)}">Remove filter: {esc(label)}</a></li>\n'
    return f'<li><a data-facet="{esc(slug)}" href="{esc(href)}">{esc(label)} ({count})</a></li>\n'


def facet_group(title: str, items: list[str]) -> str:
    if not items:
        return ""
    more = ""
    if len(items) > SHOWN_FACETS:
        more = (f'<details class="more"><summary>More: {esc(title)} ({len(items) - SHOWN_FACETS})</summary>\n'
                f'<ul>\n{"".join(items[SHOWN_FACETS:])}</ul>\n</details>\n')
    return f'<h3>{esc(title)}</h3>\n<ul>\n{"".join(items[:SHOWN_FACETS])}</ul>\n{more}'


def filters(catalog: Catalog, listing: Listing, result: SearchResult) -> str:
    """The sidebar: categories, conditions, item specifics, causes, brands and price bands."""
    counts = {facet.slug: n for facet, n in result.facet_counts}
    if listing.category:
        label = catalog.category(SITE, listing.category).label
        categories = [f'<li><a href="{esc(listing.url(path="/sch/", category=None))}">All categories</a></li>\n',
                      f'<li class="on"><strong>{esc(label)}</strong> ({result.total})</li>\n']
    else:
        categories = [f'<li><a href="{esc(listing.url(path="/sch/", category=c.slug))}">{esc(c.label)} ({n})</a></li>\n'
                      for c, n in result.category_counts]
    conditions = [facet_item(slug, label, listing.url(conditions=toggled(listing.conditions, slug)),
                             None if slug in listing.conditions else counts[slug])
                  for slug, label in CONDITIONS.items() if slug in listing.conditions or slug in counts]
    groups = [facet_group("Category", categories), facet_group("Condition", conditions)]
    for kind, title in ASPECT_GROUPS.items():
        active = [f for f in map(lambda slug: catalog.facet(SITE, slug), listing.aspects) if f.kind == kind]
        offered = [f for f, _ in result.facet_counts if f.kind == kind and f not in active]
        # price bands in price order (slugs are price-<low>-<high|up>), other values most frequent first
        offered.sort(key=(lambda f: int(f.slug.split("-")[1])) if kind == "price" else (lambda f: -counts[f.slug]))
        groups.append(facet_group(title, [
            facet_item(f.slug, f.label, listing.url(aspects=toggled(listing.aspects, f.slug)),
                       None if f in active else counts[f.slug])
            for f in active + offered]))
    clear = ""
    if listing.conditions or listing.aspects:
        clear = f'<p><a href="{esc(listing.url(conditions=(), aspects=()))}">Clear all filters</a></p>\n'
    return (f'<aside class="filters" data-section="filters" aria-label="Filters">\n<h2>Filters</h2>\n{clear}'
            f'{"".join(groups)}</aside>\n')


def sort_form(listing: Listing) -> str:
    kept = "".join(hidden(k, v) for k, v in replace(listing, sort="relevance", page=1).params())
    return (f'<form method="get" action="{esc(listing.path)}">{kept}\n<label for="sop">Sort by</label>\n'
            f'<select id="sop" name="_sop">\n{options(SORT_LABELS.items(), listing.sort)}</select>\n'
            '<button type="submit">Sort</button>\n</form>\n')


def pager(listing: Listing, result: SearchResult) -> str:
    if result.pages == 1:
        return ""
    back = (f'<a rel="prev" href="{esc(listing.url(page=result.page - 1))}">Previous page</a>'
            if result.page > 1 else "")
    ahead = (f'<a rel="next" href="{esc(listing.url(page=result.page + 1))}">Next page</a>'
             if result.page < result.pages else "")
    return (f'<nav class="pager" aria-label="Pages">{back}<span>Page {result.page} of {result.pages}</span>'
            f"{ahead}</nav>\n")


def listing_body(catalog: Catalog, listing: Listing, result: SearchResult, heading: str, top: str = "") -> str:
    """Sidebar, sort, sponsored matches, result rows, pages and related collections."""
    sponsored = catalog.sponsored(SITE, result.matched_ids)
    ads = ""
    if sponsored:
        ads = (f'<section data-section="sponsored" aria-label="Sponsored">\n<ol class="rows">\n'
               f'{"".join(row(p, sponsored=True) for p in sponsored)}</ol>\n</section>\n')
    more = f' data-next="{esc(listing.url(page=result.page + 1))}"' if result.page < result.pages else ""
    found = (f'<ol class="rows" data-results{more}>\n{"".join(map(row, result.products))}</ol>\n' if result.total
             else "<p>No exact matches found. Try fewer words, another category or fewer filters.</p>\n")
    related = "".join(section_shelf(catalog, s) for s in catalog.related_sections(SITE, result.matched_ids[:PER_PAGE]))
    first = (result.page - 1) * PER_PAGE
    count = f"Showing {first + 1}–{first + len(result.products)} of {result.total:,}" if result.total else "0 results"
    return (f'<div class="listing">\n{filters(catalog, listing, result)}<div>\n<h1>{esc(heading)}</h1>\n{top}'
            f'<div class="toolbar"><p><strong>{count}</strong></p>\n{sort_form(listing)}</div>\n{ads}'
            f'<section data-section="results" aria-label="Results">\n{found}</section>\n'
            f"{pager(listing, result)}{related}</div>\n</div>")


# --- item page ------------------------------------------------------------------------------

def variant_links(p: Product, variants, var: int) -> str:
    """Links to the item's variants (?var=<n>), the chosen one marked current."""
    if not variants:
        return ""
    links = ""
    for i, v in enumerate(variants):
        current = ' aria-current="true"' if i == var else ""
        extra = f" (+{money(v.price_delta_cents)})" if v.price_delta_cents else ""
        links += f'<li><a href="/itm/{p.id}?var={i}"{current}>{esc(v.value)}{extra}</a></li>'
    return (f"<p>{esc(variants[0].name)}: <strong>{esc(variants[var].value)}</strong></p>\n"
            f'<ul class="variants">{links}</ul>\n')


def buy_box(p: Product, var: int) -> str:
    return ('<div class="buybox" data-section="buy-box">\n'
            f'<form method="post" action="/cart/add">{hidden("item_id", p.id)}{hidden("var", var)}\n'
            f'<label for="qty">Quantity</label>\n<input type="number" id="qty" name="qty" value="1" min="1" '
            f'max="{MAX_QTY}">\n<button type="submit">Add to cart</button>\n</form>\n'
            f'<form method="post" action="/watch">{hidden("item_id", p.id)}\n'
            '<button class="secondary" type="submit">Add to Watchlist</button>\n</form>\n</div>\n')


def offer_form(p: Product) -> str:
    return (f'<section class="card" data-section="offer">\n<h2>Make an offer</h2>\n'
            f'<form method="post" action="/itm/{p.id}/offer">\n'
            '<div class="field"><label for="offer-price">Your offer (USD)</label>\n'
            '<input type="text" id="offer-price" name="offer_price" inputmode="decimal" maxlength="32">'
            '</div>\n<div class="field"><label for="offer-message">Message to seller (optional)</label>\n'
            f'<textarea id="offer-message" name="message" maxlength="{MAX_OFFER_MESSAGE}"></textarea></div>\n'
            '<button class="secondary" type="submit">Make offer</button>\n</form>\n</section>\n')


def seller_card(p: Product) -> str:
    return (f'<aside class="card" data-section="seller" aria-label="Seller">\n<h2>Seller</h2>\n'
            f"<p><strong>{esc(p.seller)}</strong></p>\n<p>{p.seller_feedback:.1f}% positive feedback</p>\n"
            f"<p>Ships from {esc(p.seller_location)}</p>\n"
            f'<p><a href="/sch/?{esc(urlencode({"_nkw": p.seller}))}">Visit store</a></p>\n</aside>\n')


def ask_form(p: Product, questions) -> str:
    answered = "".join(f"<dt>{esc(q)}</dt><dd>{esc(a)}</dd>\n" for q, a in questions)
    if answered:
        answered = f"<h3>Questions and answers</h3>\n<dl>\n{answered}</dl>\n"
    return (f'<section data-section="ask-seller">\n<h2>Ask the seller a question</h2>\n'
            f'<form method="post" action="/itm/{p.id}/ask">\n'
            '<div class="field"><label for="ask-subject">Subject</label>\n'
            f'<select id="ask-subject" name="subject">\n{options(((s, s) for s in SUBJECTS), SUBJECTS[0])}</select>'
            '</div>\n<div class="field"><label for="ask-message">Your question</label>\n'
            f'<textarea id="ask-message" name="message" maxlength="{MAX_QUESTION}"></textarea></div>\n'
            '<button type="submit">Send question</button>\n</form>\n'
            f"{answered}</section>\n")


def feedback(reviews) -> str:
    items = "".join(f'<li><strong>{"★" * r.stars}{"☆" * (5 - r.stars)} {esc(r.title)}</strong>'
                    f'<p>{esc(r.body)}</p><p class="muted">{esc(r.author)} · {esc(r.date)}</p></li>\n'
                    for r in reviews)
    items = f'<ul class="feedback">\n{items}</ul>\n' if items else "<p>No feedback yet.</p>\n"
    return f'<section data-section="feedback">\n<h2>Seller feedback</h2>\n{items}</section>\n'


def offer_cents(text: str) -> int | None:
    """An amount in US dollars ("85", "85.50", "$85", "$1,200") in cents, else None."""
    found = _AMOUNT.fullmatch(text)
    if found is None:
        return None
    return int(found[1].replace(",", "")) * 100 + int((found[2] or "0").ljust(2, "0"))


# --- cart lines ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Line:
    product: Product
    var: int
    variant: str     # "Color: Red", or "" when the item has no variants
    unit_cents: int
    qty: int


def cart_lines(catalog: Catalog, raw) -> list[Line]:
    """Cart or order lines (item id, variant index as text, quantity) with their items and prices."""
    found = {p.id: p for p in catalog.products_by_id(SITE, [pid for pid, _, _ in raw])}
    lines = []
    for pid, var, qty in raw:
        index, variants = int(var), catalog.variants(pid)
        chosen = variants[index] if index < len(variants) else None
        lines.append(Line(found[pid], index, f"{chosen.name}: {chosen.value}" if chosen else "",
                          found[pid].price_cents + (chosen.price_delta_cents if chosen else 0), qty))
    return lines


def lines_table(lines: list[Line], removable: bool = False) -> str:
    rows = ""
    for line in lines:
        p = line.product
        remove = ""
        if removable:
            remove = (f'<td><form method="post" action="/cart/remove">{hidden("item_id", p.id)}'
                      f'{hidden("var", line.var)}<button class="link" type="submit">Remove</button></form></td>')
        rows += (f'<tr data-product="{p.id}"><td><a href="/itm/{p.id}?var={line.var}">{esc(p.title)}</a>'
                 f'<div class="muted">{esc(line.variant)}</div></td><td>{money(line.unit_cents)}</td>'
                 f"<td>{line.qty}</td><td>{money(line.unit_cents * line.qty)}</td>{remove}</tr>\n")
    total = sum(line.unit_cents * line.qty for line in lines)
    head = "<th>Item</th><th>Price</th><th>Quantity</th><th>Subtotal</th>" + ("<th>Remove</th>" if removable else "")
    return (f'<table class="lines">\n<thead><tr>{head}</tr></thead>\n<tbody>\n{rows}</tbody>\n</table>\n'
            f'<p>Total: <span class="price">{money(total)}</span></p>\n')


# --- resources -------------------------------------------------------------------------------

class Resource(SiteResource):
    """A page or form of bazaar.test."""

    def item(self, item_id: int) -> Product:
        """The item with this id; 404 when there is none."""
        p = self.catalog.product(SITE, item_id)
        if p is None:
            raise falcon.HTTPNotFound(description=f"There is no item {item_id} on bazaar.")
        return p

    def form_item(self, form: dict) -> Product:
        """The item a form names in item_id; 400 when there is none."""
        p = self.catalog.product(SITE, whole_number(form, "item_id", 1, MAX_ITEM_ID))
        if p is None:
            raise falcon.HTTPBadRequest(description="item_id must be the number of an item on bazaar.")
        return p

    def variant(self, values: dict, p: Product) -> int:
        """The variant index `values` names in var (default 0); 400 unless the item has it."""
        return whole_number(values, "var", 0, max(0, len(self.catalog.variants(p.id)) - 1), default=0)


class Home(Resource):
    """GET /: category tiles, featured collections, daily deals and trending departments."""

    def on_get(self, req, resp):
        categories = self.catalog.categories(SITE)
        tiles = "".join(f'<li><a href="/b/{esc(c.slug)}">{placeholder(c.label, i)}{esc(c.label)}</a></li>\n'
                        for i, c in enumerate(categories))
        themes = self.catalog.sections(SITE, "theme")
        cards = ""
        for s in sorted(themes, key=lambda s: -len(s.product_ids))[:HOME_COLLECTIONS]:
            minis = "".join(f'<a href="/itm/{p.id}" data-product="{p.id}">{placeholder(p.brand, p.id)}'
                            f"{money(p.price_cents)}</a>"
                            for p in self.catalog.products_by_id(SITE, s.product_ids[:3]))
            cards += (f'<li data-section="{esc(s.slug)}"><h3><a href="/e/{esc(s.slug)}">{esc(s.title)}</a></h3>'
                      f'<div class="minis">{minis}</div><p>{len(s.product_ids)} items</p></li>\n')
        chips = "".join(f'<li><a data-section="{esc(s.slug)}" href="/e/{esc(s.slug)}">{esc(s.title)}</a></li>\n'
                        for s in themes)
        labels = {c.slug: c.label for c in categories}
        deals = self.catalog.section(SITE, "deals")
        trending = "".join(section_shelf(self.catalog, s, f"Trending in {labels.get(s.category, s.title)}")
                           for s in self.catalog.sections(SITE, "department")[:HOME_DEPARTMENTS])
        self.layout.render(resp, "Pre-owned, refurbished and rare finds", (
            '<section class="hero" data-section="hero">\n<h1>Pre-loved, refurbished and hard to find</h1>\n'
            "<p>Thousands of listings from independent sellers. Make an offer, ask the seller, pay when you "
            "are sure.</p>\n"
            '<a class="button" href="/sch/">Browse all listings</a>\n</section>\n'
            f'<nav data-section="categories" aria-label="Shop by category">\n<h2>Shop by category</h2>\n'
            f'<ul class="cats">\n{tiles}</ul>\n</nav>\n'
            f'<section data-section="collections">\n<h2>Featured collections</h2>\n<ul class="cards">\n{cards}</ul>\n'
            f'<details class="more"><summary>All collections ({len(themes)})</summary>\n'
            f'<ul class="chips">\n{chips}</ul>\n</details>\n</section>\n'
            f'{section_shelf(self.catalog, deals, "Daily deals") if deals else ""}{trending}'))


class Search(Resource):
    """GET /sch/: search results with filters."""

    def on_get(self, req, resp):
        listing = read_listing(req, self.catalog, "/sch/")
        result = search(self.catalog, listing)
        if listing.words.strip():
            heading = f"{result.total:,} results for {listing.words}"
        elif listing.category:
            heading = self.catalog.category(SITE, listing.category).label
        else:
            heading = "All listings"
        self.layout.render(resp, listing.words or heading, listing_body(self.catalog, listing, result, heading),
                           query=listing.words, category=listing.category or "")


class Browse(Resource):
    """GET /b/<category>: a category's listings with filters, and its best sellers."""

    def on_get(self, req, resp, category):
        found = self.catalog.category(SITE, category)
        if found is None:
            raise falcon.HTTPNotFound(description=f"There is no category {category!r}.")
        listing = read_listing(req, self.catalog, f"/b/{category}", category)
        result = search(self.catalog, listing)
        best = self.catalog.section(SITE, f"best-{category}")
        top = section_shelf(self.catalog, best, f"Trending in {found.label}") if best and listing.page == 1 else ""
        self.layout.render(resp, found.label, listing_body(self.catalog, listing, result, found.label, top),
                           category=category)


class Collection(Resource):
    """GET /e/<section>: every item of a collection."""

    def on_get(self, req, resp, slug):
        section = self.catalog.section(SITE, slug)
        if section is None:
            raise falcon.HTTPNotFound(description=f"There is no collection {slug!r}.")
        products = self.catalog.products_by_id(SITE, section.product_ids)
        self.layout.render(resp, section.title, (
            f'<section data-section="{esc(section.slug)}">\n<h1>{esc(section.title)}</h1>\n'
            f'<p class="muted">{len(products)} items</p>\n<ol class="rows">\n{"".join(map(row, products))}</ol>\n'
            "</section>"))


class Item(Resource):
    """GET /itm/<id>[?var=<n>]: an item with its buy box, offer and question forms."""

    def on_get(self, req, resp, item_id):
        p = self.item(item_id)
        variants = self.catalog.variants(p.id)
        var = self.variant({"var": req.get_param("var")}, p)
        delta = variants[var].price_delta_cents if variants else 0
        category = self.catalog.category(SITE, p.category)
        sent = [m for m in self.store.messages(visitor(req, resp)) if m["item_id"] == p.id]
        self.layout.render(resp, p.title, (
            f'<article data-product="{p.id}">\n<nav class="crumbs" aria-label="Breadcrumb"><ol>'
            f'<li><a href="/">Home</a></li><li><a href="/b/{esc(p.category)}">{esc(category.label)}</a></li>'
            f'<li aria-current="page">{esc(p.title)}</li></ol></nav>\n'
            f'<div class="item-top">\n<div>{placeholder(p.brand, p.id)}</div>\n<div>\n<h1>{esc(p.title)}</h1>\n'
            f"{self.notices(req, p, sent)}"
            f'<p>Condition: <strong>{esc(condition(p))}</strong></p>\n'
            f"<p>{prices(p, delta)}</p>\n{offer_line(p)}{variant_links(p, variants, var)}{buy_box(p, var)}"
            f"{offer_form(p) if p.accepts_offers else ''}</div>\n{seller_card(p)}</div>\n"
            f"{self.specifics(p)}"
            f'<section data-section="description">\n<h2>Item description from the seller</h2>\n'
            f"<p>{esc(p.description)}</p>\n</section>\n"
            f'<div class="cols">\n{ask_form(p, self.catalog.questions(p.id))}'
            f"{feedback(self.catalog.reviews(p.id))}</div>\n"
            f'{shelf("similar-items", "Similar items", self.catalog.bought_together(SITE, p.id))}</article>'))

    def notices(self, req, p: Product, sent: list[dict]) -> str:
        """Confirmations of the offer or question the visitor just sent about this item."""
        offers = [m for m in sent if m["kind"] == "offer"]
        questions = [m for m in sent if m["kind"] == "question"]
        text = ""
        if req.get_param("offer") == "sent" and offers:
            text += (f'<p class="notice" role="status">Your offer of {money(offers[-1]["amount_cents"])} was sent to '
                     f"{esc(p.seller)}. Sellers usually answer within 48 hours.</p>\n")
        if req.get_param("asked") == "1" and questions:
            q = questions[-1]
            text += (f'<p class="notice" role="status">Your question about {esc(q["subject"].lower())} was sent to '
                     f"{esc(p.seller)}: “{esc(q['message'])}”</p>\n")
        return text

    def specifics(self, p: Product) -> str:
        rows = [("Condition", condition(p))]
        for slug in p.facets:
            facet = self.catalog.facet(SITE, slug)
            if facet.kind in SPEC_NAMES:
                name, colon, value = facet.label.partition(": ")  # "Era: 1960s" names itself
                if not (colon and facet.kind == "feature"):
                    name, value = SPEC_NAMES[facet.kind], facet.label
                rows.append((name, value))
        cells = "".join(f"<tr><th>{esc(name)}</th><td>{esc(value)}</td></tr>\n" for name, value in rows)
        return (f'<section data-section="item-specifics">\n<h2>Item specifics</h2>\n<table class="specs">\n'
                f"<tbody>\n{cells}</tbody>\n</table>\n</section>\n")


class Offer(Resource):
    """POST /itm/<id>/offer: a Best Offer to the seller."""

    def on_post(self, req, resp, item_id):
        p = self.item(item_id)
        if not p.accepts_offers:
            raise falcon.HTTPBadRequest(description="This seller does not accept offers.")
        form = read_form(req)
        cents = offer_cents(text_field(form, "offer_price", 32, required=True))
        if cents is None:
            raise falcon.HTTPBadRequest(description="Enter your offer as an amount in US dollars, like 85 or 85.50.")
        if not 0 < cents <= 2 * p.price_cents:
            raise falcon.HTTPBadRequest(
                description=f"Your offer must be more than $0.00 and at most {money(2 * p.price_cents)}.")
        message = text_field(form, "message", MAX_OFFER_MESSAGE)
        self.store.add_message(visitor(req, resp), {"kind": "offer", "item_id": p.id, "seller": p.seller,
                                                    "amount_cents": cents, "message": message})
        see_other(resp, f"/itm/{p.id}?offer=sent")


class Ask(Resource):
    """POST /itm/<id>/ask: a question to the seller."""

    def on_post(self, req, resp, item_id):
        p = self.item(item_id)
        form = read_form(req)
        subject = form.get("subject")
        if subject not in SUBJECTS:
            raise falcon.HTTPBadRequest(description=f"Choose a subject: {', '.join(SUBJECTS)}.")
        message = text_field(form, "message", MAX_QUESTION, required=True)
        self.store.add_message(visitor(req, resp), {"kind": "question", "item_id": p.id, "seller": p.seller,
                                                    "subject": subject, "message": message})
        see_other(resp, f"/itm/{p.id}?asked=1")


class Watch(Resource):
    """POST /watch: add an item to the visitor's watchlist."""

    def on_post(self, req, resp):
        p = self.form_item(read_form(req))
        self.store.add_to_list(visitor(req, resp), WATCHLIST, p.id)
        see_other(resp, "/mye/watchlist")


class Watchlist(Resource):
    """GET /mye/watchlist: the items the visitor watches."""

    def on_get(self, req, resp):
        ids = self.store.lists(visitor(req, resp)).get(WATCHLIST, [])
        products = self.catalog.products_by_id(SITE, ids)
        content = (f'<ol class="rows">\n{"".join(map(row, products))}</ol>\n' if products
                   else '<p>You are not watching any items yet. <a href="/sch/">Find something to watch</a></p>\n')
        self.layout.render(resp, "Watchlist",
                           f'<section data-section="watchlist">\n<h1>Watchlist</h1>\n{content}</section>')


class CartAdd(Resource):
    """POST /cart/add: item_id, var, qty."""

    def on_post(self, req, resp):
        form = read_form(req)
        p = self.form_item(form)
        var = self.variant(form, p)
        qty = whole_number(form, "qty", 1, MAX_QTY, default=1)
        self.store.add_to_cart(visitor(req, resp), p.id, qty, str(var))
        see_other(resp, "/cart")


class CartRemove(Resource):
    """POST /cart/remove: item_id, var."""

    def on_post(self, req, resp):
        form = read_form(req)
        p = self.form_item(form)
        self.store.remove_from_cart(visitor(req, resp), p.id, str(self.variant(form, p)))
        see_other(resp, "/cart")


class Cart(Resource):
    """GET /cart: the visitor's cart."""

    def on_get(self, req, resp):
        lines = cart_lines(self.catalog, self.store.cart(visitor(req, resp)))
        content = (f'{lines_table(lines, removable=True)}<p><a class="button" href="/checkout">Go to checkout</a></p>\n'
                   if lines else '<p>You don\'t have any items in your cart. <a href="/">Start shopping</a></p>\n')
        self.layout.render(resp, "Cart", f'<section data-section="cart">\n<h1>Shopping cart</h1>\n{content}</section>')


class Checkout(Resource):
    """GET /checkout: the shipping form; POST /checkout: place the order."""

    def on_get(self, req, resp):
        lines = cart_lines(self.catalog, self.store.cart(visitor(req, resp)))
        if not lines:
            content = '<p>Your cart is empty. <a href="/">Start shopping</a></p>\n'
        else:
            fields = "".join(
                f'<div class="field"><label for="{name}">{esc(label)}</label>\n'
                f'<input type="text" id="{name}" name="{name}" maxlength="{limit}" autocomplete="{auto}">'
                '</div>\n'
                for name, label, limit, _, auto in ADDRESS)
            content = (f"{lines_table(lines)}<h2>Ship to</h2>\n<form method=\"post\" action=\"/checkout\">\n{fields}"
                       '<div class="field"><label for="note_to_seller">Note to seller (optional)</label>\n'
                       f'<textarea id="note_to_seller" name="note_to_seller" maxlength="{MAX_NOTE}"></textarea></div>\n'
                       '<button type="submit">Confirm and pay</button>\n</form>\n')
        self.layout.render(resp, "Checkout",
                           f'<section data-section="checkout">\n<h1>Checkout</h1>\n{content}</section>')

    def on_post(self, req, resp):
        who = visitor(req, resp)
        form = read_form(req)
        if not self.store.cart(who):
            raise falcon.HTTPBadRequest(description="Your cart is empty: add an item before you check out.")
        details = {name: text_field(form, name, limit, required) for name, _, limit, required, _ in ADDRESS}
        details["note_to_seller"] = text_field(form, "note_to_seller", MAX_NOTE)
        order = self.store.place_order(who, details)
        see_other(resp, f"/ord/{order['id']}")


class Order(Resource):
    """GET /ord/<id>: the confirmation of one of the visitor's orders."""

    def on_get(self, req, resp, order_id):
        order = self.store.order(visitor(req, resp), order_id)
        if order is None:
            raise falcon.HTTPNotFound(description="There is no such order.")
        address = "<br>".join(esc(order[name]) for name, *_ in ADDRESS if order[name])
        note = f"<h2>Note to seller</h2>\n<p>{esc(order['note_to_seller'])}</p>\n" if order["note_to_seller"] else ""
        self.layout.render(resp, f"Order {order['id']}", (
            f'<section data-section="order">\n<h1>Thank you! Your order is placed.</h1>\n'
            f"<p>Order number: <strong>{esc(order['id'])}</strong></p>\n"
            f"{lines_table(cart_lines(self.catalog, order['lines']))}<h2>Shipping to</h2>\n<p>{address}</p>\n{note}"
            '<p><a href="/">Continue shopping</a></p>\n</section>'))


def make_bazaar(catalog: Catalog) -> falcon.App:
    """bazaar.test over `catalog`."""
    return site_app(SITE, catalog, BazaarLayout(catalog), {
        "/": Home, "/sch/": Search, "/b/{category}": Browse, "/e/{slug}": Collection,
        "/itm/{item_id:id(12)}": Item, "/itm/{item_id:id(12)}/offer": Offer, "/itm/{item_id:id(12)}/ask": Ask,
        "/watch": Watch, "/mye/watchlist": Watchlist, "/cart/add": CartAdd, "/cart/remove": CartRemove,
        "/cart": Cart, "/checkout": Checkout, "/ord/{order_id}": Order,
    }, "/autosug", lambda text: "/sch/?" + urlencode({"_nkw": text}))
