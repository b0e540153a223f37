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
from urllib.parse import urlencode

import falcon

from .catalog import Catalog
from .catalog import Product
from .catalog import SORTS
from .catalog import SearchResult
from .common import MAX_QTY
from .common import esc
from .common import money
from .common import options
from .common import read_form
from .common import text_field
from .common import visitor
from .site_spec import Field
from .site_spec import FilterParam
from .site_spec import load_spec
from .storefront import Line
from .storefront import Listing
from .storefront import ProductPage
from .storefront import Templates
from .storefront import create_app
from .storefront import see_other
from .storefront import sponsored_marks
from .storefront import toggled
from .storefront import total_cents

SITE = "bazaar.test"
PER_PAGE = 40
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
ADDRESS = (Field("full_name", "Full name", 100, True, autocomplete="name"),
           Field("address_line1", "Address line 1", 200, True, autocomplete="address-line1"),
           Field("address_line2", "Address line 2 (optional)", 200, autocomplete="address-line2"),
           Field("city", "City", 100, True, autocomplete="address-level2"),
           Field("state", "State or province", 100, autocomplete="address-level1"),
           Field("postal_code", "Postal code", 20, True, autocomplete="postal-code"))
NOTE = Field("note_to_seller", "Note to seller (optional)", 1000, multiline=True)
QUESTION = Field("message", "Your question", 2000, multiline=True)
MAX_OFFER_MESSAGE = 1000
_AMOUNT = re.compile(r"\$?\s*(\d{1,3}(?:,\d{3})+|\d{1,9})(?:\.(\d{1,2}))?", re.ASCII)


# --- HTML pieces ---------------------------------------------------------------------------

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
    mark, badge = sponsored_marks(sponsored, '<p class="badge">Sponsored</p>\n')
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


# --- listings --------------------------------------------------------------------------------

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
    chosen, aspects = listing.values("LH_ItemCondition"), listing.values("_aspect")
    conditions = [facet_item(slug, label, listing.url({"LH_ItemCondition": toggled(chosen, slug)}),
                             None if slug in chosen else counts[slug])
                  for slug, label in CONDITIONS.items() if slug in chosen or slug in counts]
    groups = [facet_group("Category", categories), facet_group("Condition", conditions)]
    for kind, title in ASPECT_GROUPS.items():
        active = [f for f in map(lambda slug: catalog.facet(SITE, slug), aspects) if f.kind == kind]
        offered = [f for f, _ in result.facet_counts if f.kind == kind and f not in active]
        # price bands in price order (slugs are price-<low>-<high|up>), other values most frequent first
        offered.sort(key=(lambda f: int(f.slug.split("-")[1])) if kind == "price" else (lambda f: -counts[f.slug]))
        groups.append(facet_group(title, [
            facet_item(f.slug, f.label, listing.url({"_aspect": toggled(aspects, f.slug)}),
                       None if f in active else counts[f.slug])
            for f in active + offered]))
    clear = ""
    if chosen or aspects:
        clear = f'<p><a href="{esc(listing.url({"LH_ItemCondition": (), "_aspect": ()}))}">Clear all filters</a></p>\n'
    return (f'<aside class="filters" data-section="filters" aria-label="Filters">\n<h2>Filters</h2>\n{clear}'
            f'{"".join(groups)}</aside>\n')


def sort_form(listing: Listing) -> str:
    kept = "".join(hidden(k, v) for k, v in listing.kept_pairs())
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
            f'<textarea id="ask-message" name="message" maxlength="{QUESTION.limit}"></textarea></div>\n'
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

def variant_label(line: Line) -> str:
    """E.g. "Color: Red", or "" when the item has no variants."""
    return f"{line.variant.name}: {line.variant.value}" if line.variant else ""


def lines_table(lines: list[Line], removable: bool = False) -> str:
    rows = ""
    for line in lines:
        p = line.product
        remove = ""
        if removable:
            remove = (f'<td><form method="post" action="/cart/remove">{hidden("item_id", p.id)}'
                      f'{hidden("var", line.key)}<button class="link" type="submit">Remove</button></form></td>')
        rows += (f'<tr data-product="{p.id}"><td><a href="/itm/{p.id}?var={line.key}">{esc(p.title)}</a>'
                 f'<div class="muted">{esc(variant_label(line))}</div></td><td>{money(line.unit_cents)}</td>'
                 f"<td>{line.qty}</td><td>{money(line.subtotal_cents)}</td>{remove}</tr>\n")
    head = "<th>Item</th><th>Price</th><th>Quantity</th><th>Subtotal</th>" + ("<th>Remove</th>" if removable else "")
    return (f'<table class="lines">\n<thead><tr>{head}</tr></thead>\n<tbody>\n{rows}</tbody>\n</table>\n'
            f'<p>Total: <span class="price">{money(total_cents(lines))}</span></p>\n')


# --- pages -----------------------------------------------------------------------------------

class Pages(Templates):
    """bazaar.test's templates: each page of the storefront as the marketplace shows it."""

    def home(self, req, resp):
        """Category tiles, featured collections, daily deals and trending departments."""
        categories = self.front.categories
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

    def search(self, req, resp, listing: Listing, result: SearchResult):
        """GET /sch/: search results with filters."""
        if listing.query.strip():
            heading = f"{result.total:,} results for {listing.query}"
        elif listing.category:
            heading = self.catalog.category(SITE, listing.category).label
        else:
            heading = "All listings"
        self.layout.render(resp, listing.query or heading, listing_body(self.catalog, listing, result, heading),
                           query=listing.query, category=listing.category)

    def department(self, req, resp, listing: Listing, result: SearchResult, category):
        """GET /b/<category>: a category's listings with filters, and its best sellers."""
        best = self.catalog.section(SITE, f"best-{category.slug}")
        top = section_shelf(self.catalog, best, f"Trending in {category.label}") if best and listing.page == 1 else ""
        self.layout.render(resp, category.label, listing_body(self.catalog, listing, result, category.label, top),
                           category=category.slug)

    def section(self, req, resp, section):
        """GET /e/<section>: every item of a collection."""
        products = self.catalog.products_by_id(SITE, section.product_ids)
        self.layout.render(resp, section.title, (
            f'<section data-section="{esc(section.slug)}">\n<h1>{esc(section.title)}</h1>\n'
            f'<p class="muted">{len(products)} items</p>\n<ol class="rows">\n{"".join(map(row, products))}</ol>\n'
            "</section>"))

    def product(self, req, resp, p: Product, variants, var: int):
        """GET /itm/<id>[?var=<n>]: an item with its buy box, offer and question forms."""
        delta = variants[var].price_delta_cents if variants else 0
        category = self.catalog.category(SITE, p.category)
        sent = self.front.sent(req, resp, p)
        self.layout.render(resp, p.title, (
            f'<article data-product="{p.id}">\n<nav class="crumbs" aria-label="Breadcrumb"><ol>'
            f'<li><a href="/">Home</a></li><li><a href="/b/{esc(p.category)}">{esc(category.label)}</a></li>'
            f'<li aria-current="page">{esc(p.title)}</li></ol></nav>\n'
            f'<div class="item-top">\n<div>{placeholder(p.brand, p.id)}</div>\n<div>\n<h1>{esc(p.title)}</h1>\n'
            f"{notices(req, p, sent)}"
            f'<p>Condition: <strong>{esc(condition(p))}</strong></p>\n'
            f"<p>{prices(p, delta)}</p>\n{offer_line(p)}{variant_links(p, variants, var)}{buy_box(p, var)}"
            f"{offer_form(p) if p.accepts_offers else ''}</div>\n{seller_card(p)}</div>\n"
            f"{self.specifics(p)}"
            f'<section data-section="description">\n<h2>Item description from the seller</h2>\n'
            f"<p>{esc(p.description)}</p>\n</section>\n"
            f'<div class="cols">\n{ask_form(p, self.catalog.questions(p.id))}'
            f"{feedback(self.catalog.reviews(p.id))}</div>\n"
            f'{shelf("similar-items", "Similar items", self.catalog.bought_together(SITE, p.id))}</article>'))

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

    def lists(self, req, resp, saved: dict[str, list[int]]):
        """GET /mye/watchlist: the items the visitor watches."""
        products = self.catalog.products_by_id(SITE, saved.get(WATCHLIST, []))
        content = (f'<ol class="rows">\n{"".join(map(row, products))}</ol>\n' if products
                   else '<p>You are not watching any items yet. <a href="/sch/">Find something to watch</a></p>\n')
        self.layout.render(resp, "Watchlist",
                           f'<section data-section="watchlist">\n<h1>Watchlist</h1>\n{content}</section>')

    def cart(self, req, resp, lines: list[Line]):
        content = (f'{lines_table(lines, removable=True)}<p><a class="button" href="/checkout">Go to checkout</a></p>\n'
                   if lines else '<p>You don\'t have any items in your cart. <a href="/">Start shopping</a></p>\n')
        self.layout.render(resp, "Cart", f'<section data-section="cart">\n<h1>Shopping cart</h1>\n{content}</section>')

    def checkout(self, req, resp, lines: list[Line]):
        if not lines:
            content = '<p>Your cart is empty. <a href="/">Start shopping</a></p>\n'
        else:
            content = (f"{lines_table(lines)}<h2>Ship to</h2>\n<form method=\"post\" action=\"/checkout\">\n"
                       f"{''.join(f.html() for f in (*ADDRESS, NOTE))}"
                       '<button type="submit">Confirm and pay</button>\n</form>\n')
        self.layout.render(resp, "Checkout",
                           f'<section data-section="checkout">\n<h1>Checkout</h1>\n{content}</section>')

    def order(self, req, resp, order: dict, lines: list[Line]):
        address = "<br>".join(esc(order[f.name]) for f in ADDRESS if order[f.name])
        note = f"<h2>Note to seller</h2>\n<p>{esc(order['note_to_seller'])}</p>\n" if order["note_to_seller"] else ""
        self.layout.render(resp, f"Order {order['id']}", (
            f'<section data-section="order">\n<h1>Thank you! Your order is placed.</h1>\n'
            f"<p>Order number: <strong>{esc(order['id'])}</strong></p>\n"
            f"{lines_table(lines)}<h2>Shipping to</h2>\n<p>{address}</p>\n{note}"
            '<p><a href="/">Continue shopping</a></p>\n</section>'))


def notices(req, p: Product, sent: list[dict]) -> str:
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
                 f"{esc(p.seller)}: “{esc(q['text'])}”</p>\n")
    return text


class Item(ProductPage):
    """The storefront's product page, and POST /itm/<id>/offer: a Best Offer to the seller."""

    def on_post_offer(self, req, resp, product_id):
        p = self.front.product(product_id)
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
        self.store.add_message(visitor(req, resp), {"kind": "offer", "product_id": p.id, "seller": p.seller,
                                                    "amount_cents": cents, "text": message})
        see_other(resp, f"/itm/{p.id}?offer=sent")


SPEC = load_spec(SITE, pages=Pages, per_page=PER_PAGE, sorts=SORT_LABELS, filters=(
    FilterParam("LH_ItemCondition", choices=tuple(CONDITIONS),
                refusal=f"LH_ItemCondition must be one of {', '.join(CONDITIONS)}."),
    FilterParam("_aspect", kinds=tuple(ASPECT_GROUPS))), question=QUESTION, subjects=SUBJECTS,
    lists=(WATCHLIST,), checkout_fields=(*ADDRESS, NOTE), resources={"product": Item})

def make_bazaar(catalog: Catalog) -> falcon.App:
    """bazaar.test over `catalog`."""
    return create_app(SPEC, catalog)
