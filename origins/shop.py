"""shop.test: a small kitchenware store with search, facet filters, product pages and a cart."""

import html
import secrets
import threading
from importlib import resources
from string import Template
from urllib.parse import urlencode

import falcon

from .catalog import Catalog, Product

HTML = "text/html; charset=utf-8"
FEATURED = (102, 103, 110, 111)
MAX_QTY = 99
CART_COOKIE = "cart"
_PAGE = Template(resources.files(__package__).joinpath("templates/page.html").read_text("utf-8"))


def esc(value) -> str:
    return html.escape(str(value), quote=True)


def price(cents: int) -> str:
    return f"${cents // 100}.{cents % 100:02d}"


def render(resp, title: str, body: str, query: str = "") -> None:
    """Wrap `body` (already escaped HTML) in the shared page layout."""
    resp.content_type = HTML
    resp.text = _PAGE.substitute(title=esc(title), query=esc(query), body=body)


def product_list(products: list[Product]) -> str:
    items = "".join(
        f'<li data-product="{p.id}"><a href="/p/{p.id}" data-product="{p.id}">{esc(p.title)}</a>'
        f' <span class="price">{price(p.price_cents)}</span></li>\n'
        for p in products
    )
    return f'<ul class="products">\n{items}</ul>'


def listing(catalog: Catalog, path: str, params: list, active: list[str], heading: str,
            products: list[Product]) -> str:
    """Facet sidebar and result list; facet links keep `params` and the active facets."""

    def href(facets):
        query = urlencode(params + [("f", slug) for slug in facets])
        return esc(f"{path}?{query}" if query else path)

    labels = {f.slug: f.label for f in catalog.facets()}
    removes = "".join(
        f'<li><a href="{href([s for s in active if s != slug])}" data-facet="{esc(slug)}">'
        f"Remove filter: {esc(labels.get(slug, slug))}</a></li>\n"
        for slug in active
    )
    adds = "".join(
        f'<li><a href="{href(active + [facet.slug])}" data-facet="{esc(facet.slug)}">'
        f"{esc(facet.label)} ({count})</a></li>\n"
        for facet, count in catalog.facet_counts(products)
        if facet.slug not in active
    )
    sidebar = '<nav aria-label="Filters" data-section="filters">\n<h2>Filters</h2>\n'
    if removes:
        sidebar += f"<h3>Active filters</h3>\n<ul>\n{removes}</ul>\n"
    if adds:
        sidebar += f"<h3>Narrow results</h3>\n<ul>\n{adds}</ul>\n"
    sidebar += "</nav>\n"

    if products:
        count = f"{len(products)} result{'s' if len(products) != 1 else ''}"
        results = f"<p>{count}</p>\n{product_list(products)}"
    else:
        results = "<p>No results. Try other words or remove a filter.</p>"
    return f'{sidebar}<section data-section="results">\n<h1>{esc(heading)}</h1>\n{results}\n</section>'


class Carts:
    """Server-side carts keyed by the cart cookie: cart id -> {product id: quantity}."""

    def __init__(self):
        self._carts: dict[str, dict[int, int]] = {}
        self._lock = threading.Lock()

    def add(self, cart_id: str | None, product_id: int, qty: int) -> str:
        """Add to the cart `cart_id` (a new one if unknown) and return its id."""
        with self._lock:
            if cart_id not in self._carts:
                cart_id = secrets.token_urlsafe(18)
                self._carts[cart_id] = {}
            lines = self._carts[cart_id]
            lines[product_id] = lines.get(product_id, 0) + qty
            return cart_id

    def lines(self, cart_id: str | None) -> list[tuple[int, int]]:
        with self._lock:
            return list(self._carts.get(cart_id, {}).items())


class Home:
    def __init__(self, catalog: Catalog):
        self.catalog = catalog

    def on_get(self, req, resp):
        categories = "".join(
            f'<li><a href="/c/{esc(c)}">{esc(c.capitalize())}</a></li>\n'
            for c in self.catalog.categories()
        )
        featured = [p for p in map(self.catalog.product, FEATURED) if p]
        render(resp, "Home", (
            f'<nav aria-label="Categories" data-section="categories">\n<h2>Shop by category</h2>\n'
            f"<ul>\n{categories}</ul>\n</nav>\n"
            f'<section data-section="featured">\n<h1>Featured products</h1>\n'
            f"{product_list(featured)}\n</section>"
        ))


class Search:
    def __init__(self, catalog: Catalog):
        self.catalog = catalog

    def on_get(self, req, resp):
        query = req.get_param("k", default="")
        active = list(dict.fromkeys(req.get_param_as_list("f", default=[])))
        products = self.catalog.search(query, active)
        heading = f'Results for "{query}"' if query.strip() else "All products"
        render(resp, heading, listing(self.catalog, "/s", [("k", query)], active, heading, products),
               query=query)


class Category:
    def __init__(self, catalog: Catalog):
        self.catalog = catalog

    def on_get(self, req, resp, category):
        if category not in self.catalog.categories():
            raise falcon.HTTPNotFound(description=f"There is no category {category!r}.")
        active = list(dict.fromkeys(req.get_param_as_list("f", default=[])))
        products = self.catalog.search("", active, category=category)
        heading = category.capitalize()
        render(resp, heading, listing(self.catalog, f"/c/{category}", [], active, heading, products))


class ProductPage:
    def __init__(self, catalog: Catalog):
        self.catalog = catalog

    def on_get(self, req, resp, product_id):
        p = self.catalog.product(product_id)
        if p is None:
            raise falcon.HTTPNotFound(description=f"There is no product {product_id}.")
        labels = {f.slug: f.label for f in self.catalog.facets()}
        features = "".join(f"<li>{esc(labels[s])}</li>\n" for s in p.facets)
        if features:
            features = f'<section data-section="features">\n<h2>Features</h2>\n<ul>\n{features}</ul>\n</section>\n'
        render(resp, p.title, (
            f'<article data-product="{p.id}">\n<h1>{esc(p.title)}</h1>\n'
            f'<p>Price: <span class="price">{price(p.price_cents)}</span></p>\n'
            f'<p>Category: <a href="/c/{esc(p.category)}">{esc(p.category.capitalize())}</a></p>\n'
            f'<section data-section="description">\n<h2>Description</h2>\n<p>{esc(p.description)}</p>\n</section>\n'
            f"{features}"
            f'<form action="/cart/add" method="post" data-section="add-to-cart">\n'
            f'<input type="hidden" name="product_id" value="{p.id}">\n'
            f'<label for="qty">Quantity</label>\n'
            f'<input type="number" id="qty" name="qty" value="1" min="1" max="{MAX_QTY}">\n'
            f'<button type="submit">Add to cart</button>\n</form>\n</article>'
        ))


def _whole_number(form: dict, name: str) -> int | None:
    value = form.get(name)
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        return int(value)
    return None


class CartAdd:
    def __init__(self, catalog: Catalog, carts: Carts):
        self.catalog = catalog
        self.carts = carts

    def on_post(self, req, resp):
        if not (req.content_type or "").startswith("application/x-www-form-urlencoded"):
            raise falcon.HTTPUnsupportedMediaType(
                description="Send the form as application/x-www-form-urlencoded."
            )
        form = req.get_media(default_when_empty={})
        product_id = _whole_number(form, "product_id")
        qty = _whole_number(form, "qty")
        if product_id is None or self.catalog.product(product_id) is None:
            raise falcon.HTTPBadRequest(description="product_id must be the id of a product in the catalog.")
        if qty is None or not 1 <= qty <= MAX_QTY:
            raise falcon.HTTPBadRequest(description=f"qty must be a whole number from 1 to {MAX_QTY}.")
        cart_id = self.carts.add(req.cookies.get(CART_COOKIE), product_id, qty)
        resp.set_cookie(CART_COOKIE, cart_id, path="/", secure=False, http_only=True, same_site="Lax")
        resp.status = falcon.HTTP_303
        resp.location = "/cart"


class CartPage:
    def __init__(self, catalog: Catalog, carts: Carts):
        self.catalog = catalog
        self.carts = carts

    def on_get(self, req, resp):
        rows, total = "", 0
        for product_id, qty in self.carts.lines(req.cookies.get(CART_COOKIE)):
            p = self.catalog.product(product_id)
            total += p.price_cents * qty
            rows += (
                f'<tr data-product="{p.id}"><td><a href="/p/{p.id}" data-product="{p.id}">{esc(p.title)}</a></td>'
                f"<td>{qty}</td><td>{price(p.price_cents)}</td><td>{price(p.price_cents * qty)}</td></tr>\n"
            )
        if rows:
            content = (
                "<table>\n<thead><tr><th>Product</th><th>Quantity</th><th>Price</th><th>Subtotal</th></tr></thead>\n"
                f"<tbody>\n{rows}</tbody>\n</table>\n<p>Total: <strong>{price(total)}</strong></p>"
            )
        else:
            content = "<p>Your cart is empty.</p>"
        render(resp, "Cart", f'<section data-section="cart">\n<h1>Your cart</h1>\n{content}\n</section>')


def _error_page(req, resp, ex, params):
    """Render falcon HTTP errors (404, 400, 405, ...) as shop pages."""
    resp.status = ex.status
    if ex.headers:
        resp.set_headers(ex.headers)
    message = ex.description or "The page you asked for does not exist."
    render(resp, ex.title, f'<section data-section="error">\n<h1>{esc(ex.title)}</h1>\n<p>{esc(message)}</p>\n</section>')


def make_shop(catalog: Catalog) -> falcon.App:
    carts = Carts()
    app = falcon.App()
    app.add_route("/", Home(catalog))
    app.add_route("/s", Search(catalog))
    app.add_route("/c/{category}", Category(catalog))
    app.add_route("/p/{product_id:int}", ProductPage(catalog))
    app.add_route("/cart/add", CartAdd(catalog, carts))
    app.add_route("/cart", CartPage(catalog, carts))
    app.add_error_handler(falcon.HTTPError, _error_page)
    return app
