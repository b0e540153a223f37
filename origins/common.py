"""What shop.test and bazaar.test share: layout, money, per-visitor stores, form parsing, errors.

Both shops keep state per browser cookie (carts, lists, orders) in memory, so concurrent
agents never see each other's carts; a restart of the origins starts every visitor afresh.
"""

import html
import json
import secrets
import threading
from importlib import resources
from string import Template

import falcon

from .routes import form_int
from .routes import path_int

HTML = "text/html; charset=utf-8"
MAX_EVENT = 64 * 1024
MAX_QTY = 99
VISITOR_COOKIE = "visitor"
_SITE_JS = "static/site.js"


def esc(value) -> str:
    """`value` as text safe inside HTML elements and quoted attributes."""
    return html.escape(str(value), quote=True)


def money(cents: int) -> str:
    return f"${cents // 100:,}.{cents % 100:02d}"


def options(choices, selected) -> str:
    """<option>s for (value, label) pairs, the one whose value is `selected` marked."""
    return "".join(f'<option value="{esc(value)}"{" selected" if value == selected else ""}>{esc(label)}</option>\n'
                   for value, label in choices)


class Layout:
    """A site's page template (templates/<name>.html) with $title, $query, $body, $categories (the
    search form's options) and $nav (links to the categories) slots."""

    def __init__(self, name: str, categories=(), none_selected: str | None = None, nav: str = ""):
        text = resources.files(__package__).joinpath(f"templates/{name}.html").read_text("utf-8")
        self.template = Template(text)
        self.categories, self.none_selected, self.nav = categories, none_selected, nav

    def render(self, resp, title: str, body: str, query: str = "", category: str | None = None) -> None:
        """Wrap `body` (already escaped HTML) in the layout; `category` is preselected in the search
        form (else the option `none_selected` names, if any)."""
        resp.content_type = HTML
        selected = category if category is not None else self.none_selected
        resp.text = self.template.substitute(title=esc(title), query=esc(query), body=body, nav=self.nav,
                                             categories=options(self.categories, selected))

    def error_handler(self):
        """A falcon error handler rendering HTTP errors (404, 400, 405, 413, 415) as pages of this site."""

        def handle(req, resp, ex, params):
            resp.status = ex.status
            if ex.headers:
                resp.set_headers(ex.headers)
            message = ex.description or "The page you asked for does not exist."
            self.render(resp, ex.title, f'<section data-section="error">\n<h1>{esc(ex.title)}</h1>\n'
                                        f'<p>{esc(message)}</p>\n<p><a href="/">Back to the home page</a></p>\n'
                                        "</section>")
        return handle


def visitor(req, resp) -> str:
    """The visitor id from the visitor cookie, set on `resp` when the browser has none yet."""
    current = req.cookies.get(VISITOR_COOKIE, "")
    if len(current) == 24 and current.replace("-", "").replace("_", "").isalnum():
        return current
    current = secrets.token_urlsafe(18)
    resp.set_cookie(VISITOR_COOKIE, current, path="/", secure=False, http_only=True, same_site="Lax",
                    max_age=365 * 24 * 3600)
    return current


class VisitorStore:
    """Per-visitor state (carts, lists, orders, messages), guarded by one lock."""

    def __init__(self):
        self._lock = threading.Lock()
        self._carts: dict[str, dict[tuple[int, str], int]] = {}
        self._lists: dict[str, dict[str, list[int]]] = {}
        self._orders: dict[str, list[dict]] = {}
        self._messages: dict[str, list[dict]] = {}

    def add_to_cart(self, who: str, product_id: int, qty: int, variant: str = "") -> None:
        with self._lock:
            lines = self._carts.setdefault(who, {})
            key = (product_id, variant)
            lines[key] = min(MAX_QTY, lines.get(key, 0) + qty)

    def remove_from_cart(self, who: str, product_id: int, variant: str = "") -> None:
        with self._lock:
            self._carts.get(who, {}).pop((product_id, variant), None)

    def cart(self, who: str) -> list[tuple[int, str, int]]:
        """(product id, variant, quantity) lines in the order they were first added."""
        with self._lock:
            return [(pid, variant, qty) for (pid, variant), qty in self._carts.get(who, {}).items()]

    def add_to_list(self, who: str, name: str, product_id: int) -> None:
        with self._lock:
            items = self._lists.setdefault(who, {}).setdefault(name, [])
            if product_id not in items:
                items.append(product_id)

    def lists(self, who: str) -> dict[str, list[int]]:
        with self._lock:
            return {name: list(items) for name, items in self._lists.get(who, {}).items()}

    def place_order(self, who: str, details: dict) -> dict:
        """Turn the visitor's cart into an order with `details` (the checkout fields); returns it."""
        with self._lock:
            lines = [(pid, variant, qty) for (pid, variant), qty in self._carts.pop(who, {}).items()]
            order = {"id": f"{len(self._orders.get(who, [])) + 1:03d}-{secrets.token_hex(3).upper()}",
                     "lines": lines, **details}
            self._orders.setdefault(who, []).append(order)
            return order

    def order(self, who: str, order_id: str) -> dict | None:
        with self._lock:
            return next((o for o in self._orders.get(who, []) if o["id"] == order_id), None)

    def add_message(self, who: str, message: dict) -> None:
        """Keep a question, an offer or a message the visitor sent (shown back on their pages)."""
        with self._lock:
            self._messages.setdefault(who, []).append(message)

    def messages(self, who: str) -> list[dict]:
        with self._lock:
            return list(self._messages.get(who, []))


def read_form(req) -> dict:
    """The urlencoded form of a POST; 415 for any other body type."""
    if not (req.content_type or "").startswith("application/x-www-form-urlencoded"):
        raise falcon.HTTPUnsupportedMediaType(description="Send the form as application/x-www-form-urlencoded.")
    form = req.get_media(default_when_empty={})
    return {k: (v[-1] if isinstance(v, list) else v) for k, v in form.items()}


class IdConverter(falcon.routing.BaseConverter):
    """`{name:id}` and `{name:id(12)}` in a route: a whole number as `path_int` reads it."""

    def __init__(self, num_digits: int | None = None) -> None:
        self.digits = num_digits

    def convert(self, value: str) -> int | None:
        return path_int(value, self.digits)


def whole_number(values: dict, name: str, low: int, high: int, default: int | None = None) -> int:
    """`values[name]` as a whole number in [low, high]; 400 naming the parameter otherwise."""
    value = values.get(name)
    if value in (None, "") and default is not None:
        return default
    number = form_int(value) if len(str(value).strip().lstrip("0")) <= len(str(high)) else None
    if number is None or not low <= number <= high:
        raise falcon.HTTPBadRequest(description=f"{name} must be a whole number from {low} to {high}.")
    return number


def text_field(form: dict, name: str, limit: int, required: bool = False) -> str:
    """A free-text form field, stripped; 400 when required and empty or longer than `limit`."""
    value = form.get(name, "")
    value = value.strip() if isinstance(value, str) else ""
    if required and not value:
        raise falcon.HTTPBadRequest(description=f"Please fill in {name.replace('_', ' ')}.")
    if len(value) > limit:
        raise falcon.HTTPBadRequest(description=f"{name.replace('_', ' ')} is limited to {limit} characters.")
    return value


def page_param(req, pages: int) -> int:
    """The `page` query parameter (default 1); 400 unless it is a page that exists."""
    return whole_number({"page": req.get_param("page")}, "page", 1, pages, default=1)


class EventLog:
    """POST /_log: the site's own first-party event log (the proxy records each event)."""

    def on_post(self, req, resp):
        if len(req.bounded_stream.read(MAX_EVENT + 1)) > MAX_EVENT:
            raise falcon.HTTPContentTooLarge(description=f"Events are limited to {MAX_EVENT} bytes.")
        resp.status = falcon.HTTP_204


class SiteScript:
    """GET /_static/site.js: autocomplete, infinite scroll and first-party events."""

    def __init__(self):
        self.data = resources.files(__package__).joinpath(_SITE_JS).read_bytes()

    def on_get(self, req, resp):
        resp.content_type = "text/javascript; charset=utf-8"
        resp.data = self.data


class Suggest:
    """GET <path>?q=PREFIX: search suggestions as JSON, each with the search URL it leads to."""

    def __init__(self, catalog, site: str, search_url):
        self.catalog = catalog
        self.site = site
        self.search_url = search_url  # text → URL of the search results for it

    def on_get(self, req, resp):
        prefix = req.get_param("q", default="")[:200]
        texts = self.catalog.suggest(self.site, prefix)
        resp.content_type = "application/json"
        resp.cache_control = ["no-store"]
        resp.text = json.dumps({"q": prefix, "suggestions": [{"text": t, "url": self.search_url(t)} for t in texts]})
