"""One storefront, built per site from its specification: shop.test and bazaar.test are two `SiteSpec`s.

`create_app(spec, catalog)` builds a site's falcon app the way a Falcon app is built from its
config: one resource per concern, whose related routes are served by suffixed responders
(`Cart.on_get` for /cart, `Cart.on_post_add` for /cart/add). The spec (origins/site_spec.py) says
where (paths), with what (parameters, limits), in which words (refusals) and how each page looks
(`pages`, the site's templates); the resources here are the flow both sites share: reading a listing, finding a product
and its variant, the cart, the saved lists, asking the seller, checking out.

Both sites check what a request says in one order: a listing's search words, category, filters,
sort, page; a cart form's product, variant, quantity; a checkout's form before the visitor's cookie.
"""

from dataclasses import dataclass
from dataclasses import replace
from urllib.parse import urlencode

import falcon

from .catalog import Catalog
from .catalog import Product
from .catalog import SearchResult
from .catalog import Variant
from .common import EventLog
from .common import MAX_QTY
from .common import IdConverter
from .common import Layout
from .common import SiteScript
from .common import Suggest
from .common import VisitorStore
from .common import esc
from .common import read_form
from .common import text_field
from .common import visitor
from .common import whole_number
from .site_spec import FilterParam
from .site_spec import SiteSpec


@dataclass(frozen=True)
class Listing:
    """The state of a results page (words, category, filters, sort, page) and the links to its neighbours."""

    spec: SiteSpec
    path: str                                    # the search path, or a category's page
    query: str
    category: str | None
    filters: tuple[tuple[str, tuple[str, ...]], ...]   # (parameter, values), in the spec's order
    sort: str = "relevance"
    page: int = 1

    def values(self, name: str) -> tuple[str, ...]:
        return dict(self.filters)[name]

    @property
    def facets(self) -> tuple[str, ...]:
        return tuple(slug for _, values in self.filters for slug in values)

    def query_pairs(self) -> list[tuple[str, str]]:
        """The query parameters, sort and page last, empty or default ones left out; the category
        only on the search path (a category's page has it in its path)."""
        spec = self.spec
        pairs = [(spec.query_param, self.query)] if self.query else []
        if self.category and self.path == spec.paths.search:
            pairs.append((spec.category_param, self.category))
        pairs += [(name, value) for name, values in self.filters for value in values]
        if self.sort != "relevance":
            pairs.append((spec.sort_param, self.sort))
        if self.page > 1:
            pairs.append((spec.page_param, str(self.page)))
        return pairs

    def kept_pairs(self) -> list[tuple[str, str]]:
        """The parameters a sort form keeps: all but sort and page."""
        return replace(self, sort="relevance", page=1).query_pairs()

    def url(self, filters: dict | None = None, **changes) -> str:
        """This page's URL (not escaped) with some fields or filters changed; any change but `page`
        starts at page 1."""
        if filters:
            changes["filters"] = tuple((name, tuple(filters.get(name, values))) for name, values in self.filters)
        changed = replace(self, **{"page": 1, **changes})
        query = urlencode(changed.query_pairs())
        return changed.path + ("?" + query if query else "")


def toggled(values: tuple[str, ...], value: str) -> tuple[str, ...]:
    """`values` without `value` if it has it, else with it added."""
    return tuple(v for v in values if v != value) if value in values else (*values, value)

@dataclass(frozen=True)
class Line:
    """A cart or order line with its product and variant looked up."""

    product: Product
    key: str                     # the variant's index as text, or "" without variants
    variant: Variant | None
    qty: int

    @property
    def unit_cents(self) -> int:
        return self.product.price_cents + (self.variant.price_delta_cents if self.variant else 0)

    @property
    def subtotal_cents(self) -> int:
        return self.unit_cents * self.qty


def total_cents(lines: list[Line]) -> int:
    return sum(line.subtotal_cents for line in lines)


def sponsored_marks(sponsored: bool, badge: str) -> tuple[str, str]:
    """The attribute marking a sponsored product's tile or row and its link (docs/ORIGINS.md), and
    its visible `badge`; nothing for a product that is not an ad."""
    return (' data-sponsored="1"', badge) if sponsored else ("", "")


def see_other(resp, location: str) -> None:
    resp.status = falcon.HTTP_303
    resp.location = location


class Storefront:
    """One site of the storefront: its spec, catalog, layout, per-visitor store and templates,
    and the reading of requests every resource shares."""

    def __init__(self, spec: SiteSpec, catalog: Catalog):
        self.spec, self.catalog, self.site = spec, catalog, spec.site
        self.categories = catalog.categories(spec.site)
        choices = [("", spec.all_categories)] + [(c.slug, c.label) for c in self.categories]
        nav = "".join(f'<a href="{spec.paths.department}{esc(c.slug)}">{esc(c.label)}</a>\n' for c in self.categories)
        self.layout = Layout(spec.template, choices, "" if spec.all_selected else None, nav)
        self.store = VisitorStore()
        self.pages = spec.pages(self)

    def product(self, product_id: int) -> Product:
        """The site's product with this id; 404 otherwise (the other site's ids included)."""
        product = self.catalog.product(self.site, product_id) if 0 < product_id < self.spec.max_id else None
        if product is None:
            raise falcon.HTTPNotFound(description=self.spec.words.no_product.format(id=product_id))
        return product

    def form_product(self, form: dict) -> Product:
        """The product a form names; 400 when the site has none such."""
        product = self.catalog.product(self.site, whole_number(form, self.spec.product_field, 1, self.spec.max_id))
        if product is None:
            raise falcon.HTTPBadRequest(description=self.spec.words.bad_product_field)
        return product

    def variant(self, variants: list[Variant], value) -> int | None:
        """The index of the variant `value` names (the first when none is named); without variants
        None, or 0 where the site counts a product's one version as variant 0."""
        name, one_version = self.spec.variant_param, self.spec.words.one_version
        if not variants and one_version:
            if value not in (None, ""):
                raise falcon.HTTPBadRequest(description=one_version)
            return None
        return whole_number({name: value}, name, 0, max(0, len(variants) - 1), default=0)

    def lines(self, raw: list[tuple[int, str, int]]) -> list[Line]:
        """The store's (product id, variant key, quantity) lines as `Line`s."""
        products = {p.id: p for p in self.catalog.products_by_id(self.site, [pid for pid, _, _ in raw])}
        lines = []
        for pid, key, qty in raw:
            variants = self.catalog.variants(pid)
            variant = variants[int(key)] if key.isdigit() and int(key) < len(variants) else None
            lines.append(Line(products[pid], key, variant, qty))
        return lines

    def sent(self, req, resp, p: Product) -> list[dict]:
        """The questions and offers the visitor sent about `p`."""
        return [m for m in self.store.messages(visitor(req, resp)) if m["product_id"] == p.id]

    def listing(self, req, path: str, category: str | None = None) -> Listing:
        """The listing the query string asks for on `path`; 400 for anything it cannot be."""
        spec, words = self.spec, self.spec.words
        reads_query = spec.query_on_departments or path == spec.paths.search
        query = req.get_param(spec.query_param, default="") if reads_query else ""
        if (len(query.encode()) if spec.query_in_bytes else len(query)) > spec.query_limit:
            raise falcon.HTTPBadRequest(description=words.long_query)
        if path == spec.paths.search:
            category = req.get_param(spec.category_param) or None
            if category is not None and self.catalog.category(self.site, category) is None:
                raise falcon.HTTPBadRequest(description=words.bad_category.format(slug=category))
        filters = tuple((f.name, self.filter_values(req, f)) for f in spec.filters)
        sort = req.get_param(spec.sort_param) or "relevance"
        if sort not in spec.sorts:
            raise falcon.HTTPBadRequest(description=words.bad_sort.format(choices=", ".join(spec.sorts)))
        name = spec.page_param
        page = whole_number({name: req.get_param(name)}, name, 1, spec.max_page, default=1)
        return Listing(spec, path, query, category, filters, sort, page)

    def filter_values(self, req, param: FilterParam) -> tuple[str, ...]:
        values = tuple(dict.fromkeys(v for v in req.get_param_as_list(param.name, default=[])
                                     if v or not param.skip_empty))
        if param.most and len(values) > param.most:
            raise falcon.HTTPBadRequest(description=f"At most {param.most} filters at a time.")
        for slug in values:
            facet = None if param.choices else self.catalog.facet(self.site, slug)
            known = slug in param.choices if param.choices else facet is not None and (
                not param.kinds or facet.kind in param.kinds)
            if not known:
                raise falcon.HTTPBadRequest(description=param.refusal.format(slug=slug))
        return values

    def search(self, listing: Listing) -> SearchResult:
        """One page of the listing's results; 400 when the page is past the last."""
        result = self.catalog.search(self.site, listing.query, listing.facets, listing.category, listing.sort,
                                     listing.page, self.spec.per_page)
        if listing.page > result.pages:
            raise falcon.HTTPBadRequest(
                description=f"{self.spec.page_param} must be a whole number from 1 to {result.pages}.")
        return result


class Templates:
    """A site's pages, each rendered into its layout (a site's `pages` class is one)."""

    def __init__(self, front: Storefront):
        self.front, self.catalog, self.layout = front, front.catalog, front.layout


class Resource:
    """A concern of one site, sharing its storefront."""

    def __init__(self, front: Storefront):
        self.front, self.pages, self.catalog, self.store = front, front.pages, front.catalog, front.store


class Browse(Resource):
    """GET /: the home page; the search path: results; a category's page; a section's page."""

    def on_get_home(self, req, resp):
        self.pages.home(req, resp)

    def on_get(self, req, resp):
        listing = self.front.listing(req, self.front.spec.paths.search)
        self.pages.search(req, resp, listing, self.front.search(listing))

    def on_get_department(self, req, resp, category):
        found = self.catalog.category(self.front.site, category)
        if found is None:
            raise falcon.HTTPNotFound(description=self.front.spec.words.no_department.format(slug=category))
        listing = self.front.listing(req, f"{self.front.spec.paths.department}{category}", category)
        self.pages.department(req, resp, listing, self.front.search(listing), found)

    def on_get_section(self, req, resp, slug):
        section = self.catalog.section(self.front.site, slug)
        if section is None:
            raise falcon.HTTPNotFound(description=self.front.spec.words.no_section.format(slug=slug))
        self.pages.section(req, resp, section)


class ProductPage(Resource):
    """GET <product>/<id>: a product in the variant asked for; POST <product>/<id>/ask: a question
    for the seller, kept for the visitor."""

    def on_get(self, req, resp, product_id):
        p = self.front.product(product_id)
        variants = self.catalog.variants(p.id)
        index = self.front.variant(variants, req.get_param(self.front.spec.variant_param))
        self.pages.product(req, resp, p, variants, index)

    def on_post_ask(self, req, resp, product_id):
        spec = self.front.spec
        p = self.front.product(product_id)
        form = read_form(req)
        subject = form.get("subject") if spec.subjects else ""
        if subject not in (spec.subjects or ("",)):
            raise falcon.HTTPBadRequest(description=spec.words.bad_subject.format(choices=", ".join(spec.subjects)))
        text = text_field(form, spec.question.name, spec.question.limit, required=True)
        self.store.add_message(visitor(req, resp), {"kind": "question", "product_id": p.id, "seller": p.seller,
                                                    "subject": subject, "text": text})
        see_other(resp, f"{spec.paths.product}{p.id}?asked=1{spec.asked_anchor}")


class Cart(Resource):
    """GET /cart: the visitor's cart; POST /cart/add (product, qty, variant) and /cart/remove
    (product, variant) change it, then show it."""

    def on_get(self, req, resp):
        self.pages.cart(req, resp, self.front.lines(self.store.cart(visitor(req, resp))))

    def on_post_add(self, req, resp):
        form = read_form(req)
        p = self.front.form_product(form)
        index = self.front.variant(self.catalog.variants(p.id), form.get(self.front.spec.variant_param))
        qty = whole_number(form, "qty", 1, MAX_QTY, default=1)
        self.store.add_to_cart(visitor(req, resp), p.id, qty, "" if index is None else str(index))
        see_other(resp, self.front.spec.paths.cart)

    def on_post_remove(self, req, resp):
        spec = self.front.spec
        form = read_form(req)
        if spec.remove_checks_product:
            p = self.front.form_product(form)
            product_id, key = p.id, str(self.front.variant(self.catalog.variants(p.id), form.get(spec.variant_param)))
        else:
            product_id = whole_number(form, spec.product_field, 1, spec.max_id)
            key = form.get(spec.variant_param, "")
        self.store.remove_from_cart(visitor(req, resp), product_id, key)
        see_other(resp, spec.paths.cart)


class Lists(Resource):
    """GET the lists page: the visitor's lists; POST the list form (product, list): save a product to one."""

    def on_get(self, req, resp):
        self.pages.lists(req, resp, self.store.lists(visitor(req, resp)))

    def on_post_add(self, req, resp):
        spec = self.front.spec
        form = read_form(req)
        p = self.front.form_product(form)
        name = form.get(spec.list_param, "") if spec.list_param else spec.lists[0]
        if name not in spec.lists:
            raise falcon.HTTPBadRequest(description=spec.words.bad_list.format(choices=", ".join(spec.lists)))
        self.store.add_to_list(visitor(req, resp), name, p.id)
        see_other(resp, spec.paths.lists)


class Checkout(Resource):
    """GET /checkout: the delivery form and the order; POST /checkout: place the order; GET the
    order path: the confirmation of one of the visitor's orders."""

    def on_get(self, req, resp):
        self.pages.checkout(req, resp, self.front.lines(self.store.cart(visitor(req, resp))))

    def on_post(self, req, resp):
        spec = self.front.spec
        form = read_form(req)
        who = visitor(req, resp)
        if not self.store.cart(who):
            raise falcon.HTTPBadRequest(description=spec.words.empty_cart)
        details = {f.name: text_field(form, f.name, f.limit, f.required) for f in spec.checkout_fields}
        details.update({flag: form.get(flag, "") not in ("", "0") for flag in spec.checkout_flags})
        order = self.store.place_order(who, details)
        see_other(resp, f"{spec.paths.order}{order['id']}")

    def on_get_order(self, req, resp, order_id):
        order = self.store.order(visitor(req, resp), order_id)
        if order is None:
            raise falcon.HTTPNotFound(description=self.front.spec.words.no_order.format(id=order_id))
        self.pages.order(req, resp, order, self.front.lines(order["lines"]))


RESOURCES = {"browse": Browse, "product": ProductPage, "cart": Cart, "lists": Lists, "checkout": Checkout}


def create_app(spec: SiteSpec, catalog: Catalog) -> falcon.App:
    """The site `spec` describes, over `catalog`: each resource built once with the site's
    storefront, its routes (suffixed responders for the related ones), autocomplete, the first-party
    event log and site.js, and every HTTP error rendered as a page of the site."""
    front = Storefront(spec, catalog)
    made = {role: spec.resources.get(role, cls)(front) for role, cls in RESOURCES.items()}
    p = spec.paths
    product = f"{p.product}{{product_id:id{f'({p.product_digits})' if p.product_digits else ''}}}"
    routes = [("/", "browse", "home"), (p.search, "browse", None),
              (f"{p.department}{{category}}", "browse", "department"), (f"{p.section}{{slug}}", "browse", "section"),
              (product, "product", None), *((f"{product}/{action}", "product", action) for action in p.product_actions),
              (p.cart, "cart", None), (p.cart_add, "cart", "add"), (p.cart_remove, "cart", "remove"),
              (p.lists, "lists", None), (p.list_add, "lists", "add"),
              (p.checkout, "checkout", None), (f"{p.order}{{order_id}}", "checkout", "order")]
    app = falcon.App()
    app.router_options.converters["id"] = IdConverter
    for path, role, suffix in routes:
        app.add_route(path, made[role], suffix=suffix)
    app.add_route(p.suggest, Suggest(catalog, spec.site,
                                     lambda text: f"{p.search}?{urlencode({spec.query_param: text})}"))
    app.add_route("/_log", EventLog())
    app.add_route("/_static/site.js", SiteScript())
    app.add_error_handler(falcon.HTTPError, front.layout.error_handler())
    return app
