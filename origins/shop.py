"""shop.test: Copperleaf, an Amazon-like store over the generated catalog.

Every page is rendered on the server and every link and form works without JavaScript. The
`data-product`, `data-sponsored`, `data-section` and `data-facet` attributes and the URL grammar
(docs/ORIGINS.md) are a contract with the tracker and the auditor.
"""

from urllib.parse import urlencode

import falcon

from .catalog import Catalog
from .catalog import Product
from .catalog import Section
from .catalog import Variant
from .common import esc
from .common import money
from .common import page_param
from .site_spec import Field
from .site_spec import FilterParam
from .site_spec import load_spec
from .storefront import Line
from .storefront import Listing
from .storefront import Templates
from .storefront import create_app
from .storefront import sponsored_marks
from .storefront import toggled
from .storefront import total_cents

SITE = "shop.test"
PER_PAGE = 24
MAX_KEYWORD = 200
CAROUSEL_SIZE = 10
HOME_DEPARTMENTS = 6
HOME_THEMES = 4
SORTS = {"relevance": "Featured", "price-asc": "Price: low to high", "price-desc": "Price: high to low",
         "rating": "Avg. customer review", "newest": "Newest arrivals"}
FACET_GROUPS = (("brand", "Brand"), ("feature", "Features"), ("need", "Shop by need & lifestyle"),
                ("price", "Price"), ("rating", "Customer rating"), ("condition", "Condition"))
LISTS = ("Wish list", "Gift ideas", "Baby registry")
ADDRESS = (Field("full_name", "Full name", 200, True), Field("address_line1", "Address line 1", 200, True),
           Field("address_line2", "Address line 2 (optional)", 200), Field("city", "City", 100, True),
           Field("state", "State / province (optional)", 100), Field("postal_code", "ZIP / postal code", 20, True))
INSTRUCTIONS = Field("delivery_instructions", "Delivery instructions (optional)", 500, multiline=True)
GIFT_MESSAGE = Field("gift_message", "Gift message (optional)", 500, multiline=True)
QUESTION = Field("question", "Ask a question", 1000, multiline=True)


# --- HTML pieces ---------------------------------------------------------------------------


def href(path: str, params) -> str:
    """`path` with the query `params` (pairs, empty values left out), escaped for an attribute."""
    query = urlencode([(k, v) for k, v in params if v != ""])
    return esc(f"{path}?{query}" if query else path)


def stars(rating: float, count: int | None = None) -> str:
    """The rating as star glyphs and text, e.g. "4.4 out of 5 stars (1,234)"."""
    glyphs = "★" * round(rating) + "☆" * (5 - round(rating))
    counted = f" ({count:,})" if count is not None else ""
    return (f'<span class="rating"><span class="stars" aria-hidden="true">{glyphs}</span> '
            f"{rating:.1f} out of 5 stars{counted}</span>")


def price_tag(price: int, list_price: int) -> str:
    """The price, and the list price struck through with the saving when discounted."""
    text = f'<span class="price">{money(price)}</span>'
    if list_price > price:
        saving = round(100 * (list_price - price) / list_price)
        text = (f'<span class="save">-{saving}%</span> {text}'
                f' <span class="list-price">List: <s>{money(list_price)}</s></span>')
    return text


def thumb(product_id: int) -> str:
    """A picture placeholder, tinted per product."""
    return f'<span class="thumb" style="--h:{product_id * 47 % 360}" aria-hidden="true"></span>'


def tile(p: Product, sponsored: bool = False) -> str:
    """A product tile: picture and title linking to the product, brand, rating, price."""
    mark, badge = sponsored_marks(sponsored, '<span class="badge sponsored">Sponsored</span>\n')
    return (f'<li class="tile" data-product="{p.id}"{mark}>\n{badge}'
            f'<a href="/p/{p.id}" data-product="{p.id}"{mark}>{thumb(p.id)}<span class="title">{esc(p.title)}</span></a>\n'
            f'<span class="brand">{esc(p.brand)}</span>\n{stars(p.rating, p.rating_count)}\n'
            f"<span>{price_tag(p.price_cents, p.list_price_cents)}</span>\n</li>\n")


def carousel(slug: str, title: str, products: list[Product], see_all: str = "", sponsored: bool = False) -> str:
    """A titled, horizontally scrolling row of tiles, with a "See all" link when given one."""
    link = f' <a href="{see_all}">See all</a>' if see_all else ""
    tiles = "".join(tile(p, sponsored) for p in products)
    return (f'<section class="panel carousel" data-section="{esc(slug)}">\n'
            f'<div class="carousel-head"><h2>{esc(title)}</h2>{link}</div>\n'
            f'<ol class="row">\n{tiles}</ol>\n</section>\n')


def section_carousel(catalog: Catalog, section: Section) -> str:
    products = catalog.products_by_id(SITE, section.product_ids[:CAROUSEL_SIZE])
    return carousel(section.slug, section.title, products, f"/b/{esc(section.slug)}")


def result_list(products: list[Product], next_url: str) -> str:
    """The results as an ordered list the site script can extend from `next_url` (escaped)."""
    following = f' data-next="{next_url}"' if next_url else ""
    return f'<ol class="results" data-results{following}>\n{"".join(tile(p) for p in products)}</ol>\n'


def pagination(url, page: int, pages: int) -> str:
    """Numbered page links around `page` with Previous and Next page; `url(n)` is page n's URL."""
    if pages <= 1:
        return ""
    parts = [f'<a rel="prev" href="{url(page - 1)}">Previous</a>'] if page > 1 else []
    last = 0
    for n in sorted({1, pages, *range(max(1, page - 2), min(pages, page + 2) + 1)}):
        if n > last + 1:
            parts.append('<span aria-hidden="true">…</span>')
        parts.append(f'<span aria-current="page">{n}</span>' if n == page else f'<a href="{url(n)}">{n}</a>')
        last = n
    if page < pages:
        parts.append(f'<a rel="next" href="{url(page + 1)}">Next page</a>')
    return f'<nav class="pagination" aria-label="Pages">\n{"\n".join(parts)}\n</nav>\n'


def count_line(total: int, page: int, noun: str = "result") -> str:
    """E.g. "25–48 of 60 results"."""
    if not total:
        return f"No {noun}s"
    first = (page - 1) * PER_PAGE + 1
    return f"{first}–{min(total, page * PER_PAGE)} of {total:,} {noun}{'s' if total != 1 else ''}"


# --- results pages -------------------------------------------------------------------------


def filters(catalog: Catalog, listing: Listing, result) -> str:
    """The sidebar: the active filters, then departments and facets with their counts, by group."""
    blocks = []
    active = listing.values("f")
    if active:
        removes = "".join(
            f'<li><a data-facet="{esc(slug)}" href="{esc(listing.url({"f": [s for s in active if s != slug]}))}">'
            f"Remove filter: {esc(getattr(catalog.facet(SITE, slug), 'label', slug))}</a></li>\n"
            for slug in active)
        blocks.append(f'<div class="active-filters"><h3>Your filters</h3>\n<ul>\n{removes}'
                      f'<li><a href="{esc(listing.url({"f": ()}))}">Clear all filters</a></li>\n</ul></div>\n')
    if listing.path == "/s" and result.category_counts:
        items = [f'<li><a href="{esc(listing.url(category=None))}">‹ Any department</a></li>\n'
                 ] if listing.category else []
        items += [f'<li class="on"><strong>{esc(c.label)} ({n:,})</strong></li>\n' if c.slug == listing.category else
                  f'<li><a href="{esc(listing.url(category=c.slug))}">{esc(c.label)} ({n:,})</a></li>\n'
                  for c, n in result.category_counts]
        blocks.append(f'<h3>Department</h3>\n<ul>\n{"".join(items)}</ul>\n')
    for kind, title in FACET_GROUPS:
        counted = sorted(((f, n) for f, n in result.facet_counts if f.kind == kind), key=facet_order)
        if len(counted) > (1 if kind == "condition" else 0):
            items = "".join(facet_item(listing, f, n) for f, n in counted)
            blocks.append(f"<h3>{esc(title)}</h3>\n<ul>\n{items}</ul>\n")
    return f'<aside class="filters" aria-label="Filters" data-section="filters">\n{"".join(blocks)}</aside>\n'


def facet_order(counted) -> tuple:
    """Brands by name, price bands from the cheapest, other facets in catalog order (a stable sort keeps it)."""
    facet, _ = counted
    if facet.kind == "brand":
        return (facet.label.lower(),)
    low = facet.slug.split("-")[1] if facet.kind == "price" else ""
    return (int(low) if low.isdigit() else 0,)


def facet_item(listing: Listing, facet, count: int) -> str:
    """A facet value: a link adding it, or for an active one a checked link removing it."""
    on = facet.slug in listing.values("f")
    return (f'<li{" class=\"on\"" if on else ""}><a data-facet="{esc(facet.slug)}" '
            f'href="{esc(listing.url({"f": toggled(listing.values("f"), facet.slug)}))}">'
            f"{esc(facet.label)} ({count:,})</a></li>\n")


def sort_form(listing: Listing) -> str:
    """GET form choosing the sort order, keeping words, department and facets."""
    hidden = "".join(f'<input type="hidden" name="{k}" value="{esc(v)}">\n' for k, v in listing.kept_pairs())
    options = "".join(f'<option value="{key}"{" selected" if key == listing.sort else ""}>{label}</option>\n'
                      for key, label in SORTS.items())
    return (f'<form class="sort" action="{esc(listing.path)}" method="get" data-section="sort">\n{hidden}'
            f'<label for="sort">Sort by</label>\n<select id="sort" name="sort">\n{options}</select>\n'
            f'<button type="submit" class="quiet">Sort</button>\n</form>\n')


def results_body(catalog: Catalog, listing: Listing, result, heading: str) -> str:
    """A search or department page: filters, sort, sponsored slot, results, pages, related themes."""
    parts = [f'<div class="panel toolbar">\n<div><h1>{esc(heading)}</h1>\n'
             f"<p>{count_line(result.total, listing.page)}</p></div>\n{sort_form(listing)}</div>\n"]
    sponsored = catalog.sponsored(SITE, result.matched_ids)
    if sponsored:
        parts.append(carousel("sponsored", "Sponsored products", sponsored, sponsored=True))
    if result.products:
        following = esc(listing.url(page=listing.page + 1)) if listing.page < result.pages else ""
        parts.append(f'<section data-section="results" aria-label="Results">\n'
                     f"{result_list(result.products, following)}"
                     f"{pagination(lambda n: esc(listing.url(page=n)), listing.page, result.pages)}</section>\n")
    else:
        parts.append('<section class="panel" data-section="results">\n<p>No results match your search.</p>\n'
                     "<p>Try other words, another department, or remove a filter.</p>\n</section>\n")
    parts += [section_carousel(catalog, s) for s in catalog.related_sections(SITE, result.matched_ids)]
    return (f'<div class="listing">\n{filters(catalog, listing, result)}'
            f'<div class="listing-main">\n{"".join(parts)}</div>\n</div>')


# --- product page --------------------------------------------------------------------------


def variant_links(p: Product, variants: list[Variant], index: int | None) -> str:
    if not variants:
        return ""
    links = "".join(
        f'<li><a href="/p/{p.id}?variant={i}"{" aria-current=\"true\"" if i == index else ""}>{esc(v.value)}'
        f'{f" (+{money(v.price_delta_cents)})" if v.price_delta_cents else ""}</a></li>\n'
        for i, v in enumerate(variants))
    chosen = variants[index]
    return (f'<div data-section="variants">\n<h2>{esc(chosen.name)}: <strong>{esc(chosen.value)}</strong></h2>\n'
            f'<ul class="variants">\n{links}</ul>\n</div>\n')


def buy_box(p: Product, index: int | None, price: int) -> str:
    variant = f'<input type="hidden" name="variant" value="{index}">\n' if index is not None else ""
    lists = "".join(f'<option value="{esc(name)}">{esc(name)}</option>\n' for name in LISTS)
    return (
        f'<aside class="buy-box" data-section="buy-box">\n<span class="price">{money(price)}</span>\n'
        "<span>FREE Returns · Delivery in 2–4 business days</span>\n"
        '<span class="in-stock">In Stock</span>\n'
        f'<form action="/cart/add" method="post">\n<input type="hidden" name="product_id" value="{p.id}">\n{variant}'
        f'<label for="qty">Quantity</label>\n'
        '<input type="number" id="qty" name="qty" value="1">\n'
        '<button type="submit">Add to cart</button>\n</form>\n'
        f'<form action="/list/add" method="post">\n<input type="hidden" name="product_id" value="{p.id}">\n'
        f'<label for="list">Save to a list</label>\n<select id="list" name="list">\n{lists}</select>\n'
        '<button type="submit" class="quiet">Add to list</button>\n</form>\n'
        "<span class=\"badge\">Ships from and sold by Copperleaf</span>\n</aside>\n")


def questions(catalog: Catalog, p: Product, sent: list[dict], asked: bool) -> str:
    answered = "".join(f'<div class="qa"><p><strong>Question:</strong> {esc(q)}</p>\n'
                       f"<p><strong>Answer:</strong> {esc(a)}</p></div>\n" for q, a in catalog.questions(p.id))
    mine = "".join(f'<div class="qa"><p><strong>Your question:</strong> {esc(m["text"])}</p>\n'
                   "<p>Awaiting an answer from the seller.</p></div>\n" for m in sent if m["kind"] == "question")
    thanks = '<p class="notice" role="status">Thanks, your question was sent to the seller.</p>\n' if asked else ""
    return (f'<section class="panel" id="questions" data-section="questions">\n'
            f"<h2>Customer questions &amp; answers</h2>\n{thanks}{answered}{mine}"
            f'<form action="/p/{p.id}/ask" method="post">\n{QUESTION.html()}'
            '<button type="submit" class="quiet">Ask</button>\n</form>\n</section>\n')


def reviews(catalog: Catalog, p: Product, keyword: str) -> str:
    found = catalog.reviews(p.id, keyword)
    items = "".join(
        f'<div class="review"><p><strong>{esc(r.author)}</strong></p>\n'
        f"<p>{stars(r.stars)} <strong>{esc(r.title)}</strong></p>\n"
        f'<p class="badge">Reviewed on {esc(r.date)}</p>\n<p>{esc(r.body)}</p></div>\n' for r in found)
    if keyword and not found:
        items = f'<p>No reviews mention "{esc(keyword)}".</p>\n'
    elif keyword:
        items = (f'<p>{len(found)} review{"s mention" if len(found) != 1 else " mentions"} "{esc(keyword)}". '
                 f'<a href="/p/{p.id}#reviews">Show all reviews</a></p>\n{items}')
    return (f'<section class="panel" id="reviews" data-section="reviews">\n<h2>Customer reviews</h2>\n'
            f"<p>{stars(p.rating, p.rating_count)}</p>\n"
            f'<form action="/p/{p.id}#reviews" method="get">\n<label for="review_kw">Search customer reviews</label>\n'
            f'<input type="text" id="review_kw" name="review_kw" value="{esc(keyword)}" maxlength="{MAX_KEYWORD}">\n'
            f'<button type="submit" class="quiet">Filter reviews</button>\n</form>\n{items}</section>\n')


# --- cart, lists, checkout, orders ------------------------------------------------------------


def lines_table(lines: list[Line], removable: bool) -> str:
    """The lines as a table with subtotals and the total; with remove buttons when `removable`."""
    rows = ""
    for line in lines:
        p = line.product
        variant = f"{esc(line.variant.name)}: {esc(line.variant.value)}" if line.variant else ""
        remove = (f'<td><form action="/cart/remove" method="post">'
                  f'<input type="hidden" name="product_id" value="{p.id}">'
                  f'<input type="hidden" name="variant" value="{esc(line.key)}">'
                  '<button type="submit" class="quiet">Remove</button></form></td>' if removable else "")
        rows += (f'<tr data-product="{p.id}"><td><a href="/p/{p.id}" data-product="{p.id}">{esc(p.title)}</a></td>'
                 f"<td>{variant}</td><td>{line.qty}</td><td>{money(line.unit_cents)}</td>"
                 f"<td>{money(line.subtotal_cents)}</td>{remove}</tr>\n")
    head = "<th>Product</th><th>Option</th><th>Quantity</th><th>Price</th><th>Subtotal</th>"
    return (f'<table>\n<thead><tr>{head}{"<th>Remove</th>" if removable else ""}</tr></thead>\n<tbody>\n{rows}</tbody>\n'
            f"</table>\n<p>Total ({sum(line.qty for line in lines)} items): <strong>{money(total_cents(lines))}</strong></p>\n")


class Pages(Templates):
    """shop.test's templates: each page of the storefront as Copperleaf shows it."""

    def home(self, req, resp):
        """Hero, today's deals, department best sellers, themed carousels and every theme."""
        c = self.catalog
        departments = c.sections(SITE, "department")
        step = max(1, len(departments) // HOME_DEPARTMENTS)
        themes = c.sections(SITE, "theme")
        featured = sorted(themes, key=lambda s: -len(s.product_ids))[:HOME_THEMES]
        deals = c.sections(SITE, "deals")
        theme_links = "".join(f'<li><a href="/b/{esc(s.slug)}">{esc(s.title)}</a></li>\n' for s in themes)
        department_cards = "".join(f'<li><a href="/c/{esc(cat.slug)}">{esc(cat.label)}</a></li>\n'
                                   for cat in self.front.categories)
        body = (
            '<section class="hero" data-section="hero">\n<h1>Everything for the way you live</h1>\n'
            "<p>Thousands of home, health, outdoor and tech essentials, with free returns within 30 days.</p>\n"
            '<a class="button" href="/b/deals">Shop today\'s deals</a>\n</section>\n'
            + "".join(section_carousel(c, s) for s in deals)
            + "".join(section_carousel(c, s) for s in departments[::step][:HOME_DEPARTMENTS])
            + '<section class="themes" data-section="themes">\n<h2 class="band">Shop by need &amp; lifestyle</h2>\n'
            + "".join(section_carousel(c, s) for s in featured)
            + f'<div class="panel">\n<h2>All collections</h2>\n<ul class="theme-links">\n{theme_links}</ul>\n</div>\n'
              "</section>\n"
            + f'<section class="panel" data-section="shop-by-department">\n<h2>Shop by department</h2>\n'
              f'<ul class="dept-grid">\n{department_cards}</ul>\n</section>'
        )
        self.layout.render(resp, "Online shopping for home, health, outdoor and tech", body)

    def search(self, req, resp, listing: Listing, result):
        """GET /s?k=&i=&f=&sort=&page=: search results."""
        if listing.query.strip():
            heading = f'Results for "{listing.query}"'
        else:
            heading = self.catalog.category(SITE, listing.category).label if listing.category else "All products"
        self.layout.render(resp, heading, results_body(self.catalog, listing, result, heading), query=listing.query,
                           category=listing.category)

    def department(self, req, resp, listing: Listing, result, category):
        """GET /c/<category>?f=&sort=&page=: every product of a department."""
        self.layout.render(resp, category.label, results_body(self.catalog, listing, result, category.label))

    def section(self, req, resp, section: Section):
        """GET /b/<slug>?page=: a themed section, a department's best sellers or today's deals."""
        pages = max(1, -(-len(section.product_ids) // PER_PAGE))
        page = page_param(req, pages)
        products = self.catalog.products_by_id(SITE, section.product_ids[(page - 1) * PER_PAGE: page * PER_PAGE])
        path = f"/b/{section.slug}"

        def url(n):
            return href(path, [("page", str(n) if n > 1 else "")])

        more = ""
        if section.category:
            label = self.catalog.category(SITE, section.category).label
            more = f' <a href="/c/{esc(section.category)}">See all in {esc(label)}</a>'
        body = (f'<section data-section="{esc(section.slug)}">\n<div class="panel toolbar"><div>'
                f"<h1>{esc(section.title)}</h1>\n"
                f"<p>{count_line(len(section.product_ids), page, 'item')}{more}</p></div></div>\n"
                f"{result_list(products, url(page + 1) if page < pages else '')}"
                f"{pagination(url, page, pages)}</section>")
        self.layout.render(resp, section.title, body)

    def product(self, req, resp, p: Product, variants: list[Variant], index: int | None):
        """GET /p/<id>?variant=&review_kw=&asked=: details, buy box, bought together, questions, reviews."""
        keyword = req.get_param("review_kw", default="").strip()
        if len(keyword) > MAX_KEYWORD:
            raise falcon.HTTPBadRequest(description=f"review_kw is limited to {MAX_KEYWORD} characters.")
        variant = variants[index] if variants else None
        delta = variant.price_delta_cents if variant else 0
        price, list_price = p.price_cents + delta, p.list_price_cents + delta
        category = self.catalog.category(SITE, p.category)
        bought = self.catalog.bought_together(SITE, p.id)
        body = (
            f'<article class="product-page" data-product="{p.id}">\n'
            f'<nav class="breadcrumb" aria-label="Breadcrumb"><ol><li><a href="/c/{esc(p.category)}">'
            f'{esc(category.label)}</a></li><li aria-current="page">{esc(p.title)}</li></ol></nav>\n'
            f'<div class="product panel">\n{thumb(p.id)}\n<div class="details">\n<h1>{esc(p.title)}</h1>\n'
            f'<p><a href="{href("/s", [("k", p.brand)])}">Visit the {esc(p.brand)} Store</a></p>\n'
            f"<p>{stars(p.rating, p.rating_count)}</p>\n<p>{price_tag(price, list_price)}</p>\n"
            f"{variant_links(p, variants, index)}"
            f'<section data-section="about">\n<h2>About this item</h2>\n'
            f'<ul>\n{"".join(f"<li>{esc(b)}</li>\n" for b in p.bullets)}</ul>\n<p>{esc(p.description)}</p>\n'
            f"</section>\n</div>\n{buy_box(p, index, price)}</div>\n"
            + (carousel("bought-together", "Frequently bought together", bought) if bought else "")
            + questions(self.catalog, p, self.front.sent(req, resp, p), req.get_param("asked") == "1")
            + reviews(self.catalog, p, keyword)
            + "</article>"
        )
        self.layout.render(resp, p.title, body)

    def cart(self, req, resp, lines: list[Line]):
        if lines:
            content = (f"{lines_table(lines, removable=True)}"
                       '<p><a class="button" href="/checkout">Proceed to checkout</a></p>\n')
        else:
            content = '<p>Your Copperleaf cart is empty.</p>\n<p><a href="/">Continue shopping</a></p>\n'
        self.layout.render(resp, "Shopping cart",
                           f'<section class="panel" data-section="cart">\n<h1>Shopping cart</h1>\n{content}</section>')

    def lists(self, req, resp, saved: dict[str, list[int]]):
        rows = "".join(carousel("list-" + name.lower().replace(" ", "-"), name,
                                self.catalog.products_by_id(SITE, saved[name]))
                       for name in LISTS if saved.get(name))
        content = rows or '<p class="panel">You have not saved anything yet. <a href="/">Start shopping</a></p>\n'
        self.layout.render(resp, "Your lists", f'<section data-section="lists">\n<h1>Your lists</h1>\n{content}</section>')

    def checkout(self, req, resp, lines: list[Line]):
        if not lines:
            content = ('<p>Your cart is empty, so there is nothing to check out.</p>\n'
                       '<p><a href="/">Continue shopping</a></p>\n')
            self.layout.render(resp, "Checkout", f'<section class="panel" data-section="checkout">\n'
                                                 f"<h1>Checkout</h1>\n{content}</section>")
            return
        body = (
            '<div class="checkout">\n<section class="panel" data-section="checkout">\n<h1>Checkout</h1>\n'
            '<form action="/checkout" method="post">\n<h2>Delivery address</h2>\n'
            f'{"".join(f.html() for f in ADDRESS)}{INSTRUCTIONS.html()}'
            '<div class="check"><input type="checkbox" id="gift" name="gift" value="1">'
            '<label for="gift">This order is a gift</label></div>\n'
            f"{GIFT_MESSAGE.html()}"
            '<button type="submit">Place your order</button>\n</form>\n</section>\n'
            f'<aside class="panel" data-section="order-summary">\n<h2>Order summary</h2>\n'
            f"{lines_table(lines, removable=False)}</aside>\n</div>"
        )
        self.layout.render(resp, "Checkout", body)

    def order(self, req, resp, order: dict, lines: list[Line]):
        address = "<br>\n".join(esc(order[f.name]) for f in ADDRESS if order[f.name])
        notes = ""
        if order["delivery_instructions"]:
            notes += f"<h2>Delivery instructions</h2>\n<p>{esc(order['delivery_instructions'])}</p>\n"
        if order["gift"]:
            notes += "<p><strong>This order is a gift.</strong></p>\n"
        if order["gift_message"]:
            notes += f"<h2>Gift message</h2>\n<p>{esc(order['gift_message'])}</p>\n"
        body = (f'<section class="panel" data-section="order">\n<h1>Thank you, your order has been placed</h1>\n'
                f"<p>Order number <strong>{esc(order['id'])}</strong></p>\n"
                f"<h2>Delivering to</h2>\n<p>{address}</p>\n{notes}"
                f"{lines_table(lines, removable=False)}"
                '<p><a href="/">Continue shopping</a></p>\n</section>')
        self.layout.render(resp, "Order placed", body)


SPEC = load_spec(SITE, pages=Pages, per_page=PER_PAGE, sorts=SORTS, filters=(FilterParam("f", most=20, skip_empty=True),),
                 question=QUESTION, subjects=(), lists=LISTS, checkout_fields=(*ADDRESS, INSTRUCTIONS, GIFT_MESSAGE),
                 checkout_flags=("gift",))

def make_shop(catalog: Catalog) -> falcon.App:
    """shop.test over `catalog`."""
    return create_app(SPEC, catalog)
