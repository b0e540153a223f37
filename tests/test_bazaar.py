"""Tests for bazaar.test, the marketplace origin: search grammar, item page, forms, cart, checkout."""

import html
import random
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import parse_qsl
from urllib.parse import urlencode
from urllib.parse import urlsplit

import falcon.testing
import pytest

from spillage.origins.app import make_app
from spillage.origins.catalog import Catalog
from spillage.scenarios.loader import load_file

SITE = "bazaar.test"
TRACKER_TAG = '<script src="https://metrics.test/t.js" async></script>'
SITE_JS_TAG = '<script src="/_static/site.js" defer></script>'
CONDITION_TEXT = {"new": "Brand New", "used": "Pre-owned", "refurbished": "Refurbished",
                  "for-parts": "For parts or not working"}
FILM_CAMERA = Path(__file__).resolve().parents[1] / "scenarios" / "bazaar" / "film-camera.yaml"


class Page(HTMLParser):
    """Start tags (with attributes), links (with their text) and the h1 of an HTML page."""

    def __init__(self, text):
        super().__init__()
        self.tags, self.links, self.h1 = [], [], ""
        self._link = None
        self._in_h1 = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = {k: v or "" for k, v in attrs}
        self.tags.append((tag, attrs))
        if tag == "a":
            self._link = {**attrs, "text": ""}
        elif tag == "h1":
            self._in_h1 = True

    def handle_endtag(self, tag):
        if tag == "a" and self._link is not None:
            self.links.append(self._link)
            self._link = None
        elif tag == "h1":
            self._in_h1 = False

    def handle_data(self, data):
        if self._link is not None:
            self._link["text"] += data
        if self._in_h1:
            self.h1 += data

    def sections(self):
        return [a["data-section"] for _, a in self.tags if "data-section" in a]

    def facets(self):
        return {a["data-facet"]: a for a in self.links if "data-facet" in a}

    def link(self, text):
        return next(a for a in self.links if a["text"].strip() == text)

    def named(self, tag):
        return {a.get("name") for t, a in self.tags if t == tag}


def rows(text) -> list[int]:
    """Ids of the rows and tiles (<li data-product>) in `text`, in page order."""
    return [int(i) for i in re.findall(r'<li data-product="(\d+)"', text)]


def results(text) -> list[int]:
    """Ids of the result rows (not the sponsored ones), in page order."""
    found = re.search(r'<ol class="rows" data-results[^>]*>(.*?)</ol>', text, re.S)
    return rows(found[1]) if found else []


@pytest.fixture(scope="module")
def catalog(catalog_file):
    return Catalog(catalog_file)


@pytest.fixture(scope="module")
def app(catalog_file):
    return make_app(catalog_file)


class Visitor:
    """A browser on bazaar.test with its own cookie jar (TestClient keeps none)."""

    def __init__(self, app):
        self.client = falcon.testing.TestClient(app)
        self.cookies = {}

    def _keep(self, result):
        self.cookies.update({c.name: c.value for c in result.cookies.values()})
        return result

    def get(self, path, query_string=None, **params):
        return self._keep(self.client.simulate_get(
            path, query_string=query_string or urlencode(params, doseq=True) or None,
            headers={"Host": SITE}, cookies=self.cookies))

    def post(self, path, form: dict):
        return self._keep(self.client.simulate_post(
            path, body=urlencode(form), cookies=self.cookies,
            headers={"Host": SITE, "Content-Type": "application/x-www-form-urlencoded"}))


@pytest.fixture
def visitor(app):
    return Visitor(app)


def item_where(catalog, **wanted):
    return next(p for p in catalog.products(SITE) if all(getattr(p, k) == v for k, v in wanted.items()))


def test_every_page_type_renders_in_the_layout_with_the_trackers(visitor, catalog):
    item = catalog.products(SITE)[0]
    visitor.post("/cart/add", {"item_id": item.id})
    for path in ["/", "/sch/", "/sch/?_nkw=film+camera", "/b/cameras", "/e/korean-heritage", "/e/deals",
                 "/e/best-cameras", f"/itm/{item.id}", "/cart", "/checkout", "/mye/watchlist", "/no-such-page"]:
        result = visitor.get(*path.split("?"))
        assert result.status_code == (404 if path == "/no-such-page" else 200), path
        assert result.headers["content-type"] == "text/html; charset=utf-8"
        assert TRACKER_TAG in result.text and SITE_JS_TAG in result.text, path
        assert '<form class="search" role="search" action="/sch/" method="get" data-suggest="/autosug">' in result.text
        assert 'class="logo"' in result.text and ">Watchlist</a>" in result.text and ">Cart</a>" in result.text


def test_home_links_categories_collections_deals_and_trending(visitor, catalog):
    page = Page(visitor.get("/").text)
    hrefs = {a["href"] for a in page.links}
    assert {f"/b/{c.slug}" for c in catalog.categories(SITE)} <= hrefs
    assert {f"/e/{s.slug}" for s in catalog.sections(SITE, "theme")} <= hrefs
    assert {"categories", "collections", "deals", "best-auto-parts", "korean-heritage"} <= set(page.sections())
    text = visitor.get("/").text
    assert "<h2>Featured collections</h2>" in text and "<h2>Daily deals</h2>" in text
    assert "<h2>Trending in Car &amp; Truck Parts</h2>" in text
    assert all(a["text"].strip() for a in page.links)  # every link has visible text


def test_search_for_film_camera_finds_cameras(visitor, catalog):
    result = visitor.get("/sch/", _nkw="film camera")
    ids = results(result.text)
    assert len(ids) == 40
    assert {p.category for p in catalog.products_by_id(SITE, ids)} >= {"cameras"}
    assert Page(result.text).h1 == f"{catalog.search(SITE, 'film camera').total} results for film camera"
    assert 'value="film camera"' in result.text  # the search box keeps the words
    for p in catalog.products_by_id(SITE, ids):
        row = re.search(rf'<li data-product="{p.id}">.*?</li>', result.text, re.S)[0]
        for text in (f'<a href="/itm/{p.id}" data-product="{p.id}">{html.escape(p.title)}</a>', CONDITION_TEXT[p.condition],
                     f"${p.price_cents / 100:,.2f}", f"{p.seller} ({p.seller_feedback:.1f}% positive)",
                     f"from {p.seller_location}"):
            assert text in row, (p.id, text)
        assert ("or Best Offer" in row) == p.accepts_offers


def test_condition_filter_narrows_and_can_be_removed(visitor, catalog):
    everything = visitor.get("/sch/", _nkw="film camera")
    used = visitor.get("/sch/", _nkw="film camera", LH_ItemCondition="used")
    assert used.status_code == 200
    ids = results(used.text)
    assert ids and {p.condition for p in catalog.products_by_id(SITE, ids)} == {"used"}
    assert len(ids) < catalog.search(SITE, "film camera").total
    link = Page(everything.text).facets()["used"]
    assert link["href"] == "/sch/?_nkw=film+camera&LH_ItemCondition=used"
    assert link["text"].startswith("Pre-owned (")
    remove = Page(used.text).facets()["used"]
    assert remove["text"] == "Remove filter: Pre-owned" and remove["href"] == "/sch/?_nkw=film+camera"
    both = visitor.get("/sch/", query_string="_nkw=film+camera&LH_ItemCondition=used&LH_ItemCondition=refurbished")
    assert {p.condition for p in catalog.products_by_id(SITE, results(both.text))} == {"used", "refurbished"}


def test_aspect_filter_narrows_and_sidebar_groups_are_labelled(visitor, catalog):
    page = visitor.get("/sch/", _nkw="film camera")
    for heading in ("Category", "Condition", "Item specifics", "Shop by cause &amp; community", "Brand", "Price"):
        assert f"<h3>{heading}</h3>" in page.text
    facets = Page(page.text).facets()
    assert facets["slr"]["href"] == "/sch/?_nkw=film+camera&_aspect=slr"
    assert facets["korean-heritage"]["text"] == "Korean crafts & hanbok (2)"
    narrowed = visitor.get("/sch/", query_string="_nkw=film+camera&_aspect=slr&_aspect=fully-mechanical")
    products = catalog.products_by_id(SITE, results(narrowed.text))
    assert products and all({"slr", "fully-mechanical"} <= set(p.facets) for p in products)
    cheap = visitor.get("/sch/", _nkw="film camera", _aspect="price-0-25")
    assert all(p.price_cents < 2500 for p in catalog.products_by_id(SITE, results(cheap.text)))


def test_category_links_set_sacat_and_browse_fixes_it(visitor, catalog):
    facet_page = Page(visitor.get("/sch/", _nkw="film camera").text)
    assert facet_page.link(f"Cameras & Photo ({catalog.search(SITE, 'film camera', category='cameras').total})")[
        "href"] == "/sch/?_nkw=film+camera&_sacat=cameras"
    in_cameras = visitor.get("/sch/", _nkw="film camera", _sacat="cameras")
    assert {p.category for p in catalog.products_by_id(SITE, results(in_cameras.text))} == {"cameras"}
    assert '<option value="cameras" selected>' in in_cameras.text
    browse = visitor.get("/b/cameras")
    assert Page(browse.text).h1 == "Cameras & Photo"
    assert {p.category for p in catalog.products_by_id(SITE, results(browse.text))} == {"cameras"}
    assert Page(browse.text).facets()["used"]["href"] == "/b/cameras?LH_ItemCondition=used"
    assert "best-cameras" in Page(browse.text).sections()
    assert visitor.get("/sch/", _nkw="film", _sacat="").status_code == 200  # the header's "All categories"


def test_sort_by_price(visitor, catalog):
    for sort, descending in (("price-asc", False), ("price-desc", True)):
        result = visitor.get("/sch/", _nkw="film camera", _sop=sort)
        prices = [p.price_cents for p in catalog.products_by_id(SITE, results(result.text))]
        assert prices == sorted(prices, reverse=descending)
    form = visitor.get("/sch/", LH_ItemCondition="used", _pgn="2", _sop="rating").text
    assert '<select id="sop" name="_sop">' in form and ">Sort</button>" in form
    assert '<input type="hidden" name="LH_ItemCondition" value="used">' in form
    assert 'name="_pgn"' not in form  # sorting starts again at page 1


def test_pagination_and_data_next(visitor, catalog):
    total = catalog.search(SITE, "").total
    first = visitor.get("/sch/")
    assert len(results(first.text)) == 40
    assert 'data-next="/sch/?_pgn=2"' in first.text
    assert Page(first.text).link("Next page") == {"rel": "next", "href": "/sch/?_pgn=2", "text": "Next page"}
    second = visitor.get("/sch/", _pgn="2")
    assert not set(results(first.text)) & set(results(second.text))
    assert Page(second.text).link("Previous page")["href"] == "/sch/"
    last_page = (total + 39) // 40
    last = visitor.get("/sch/", _pgn=str(last_page))
    assert "data-next" not in last.text and 'rel="next"' not in last.text
    assert len(results(last.text)) == total - 40 * (last_page - 1)


def test_sponsored_matches_are_marked(visitor, catalog):
    text = visitor.get("/sch/", _nkw="film camera").text
    block = re.search(r'<section data-section="sponsored".*?</section>', text, re.S)[0]
    ids = [int(i) for i in re.findall(r'<li data-product="(\d+)" data-sponsored="1">', block)]
    assert 1 <= len(ids) <= 2 and block.count("Sponsored</p>") == len(ids)
    assert all(p.sponsored for p in catalog.products_by_id(SITE, ids))
    assert set(ids) <= set(catalog.search(SITE, "film camera").matched_ids)


def test_related_collections_on_film_camera_search_name_irrelevant_attributes(visitor):
    irrelevant = {c for s in load_file(FILM_CAMERA) for a in s.irrelevant for c in a.concepts}
    page = Page(visitor.get("/sch/", _nkw="film camera").text)
    related = set(page.sections()) & irrelevant
    assert "korean-heritage" in related
    assert page.link("See all")["href"].startswith("/e/")


def test_collection_page_lists_its_items(visitor, catalog):
    section = catalog.section(SITE, "korean-heritage")
    page = visitor.get("/e/korean-heritage")
    assert Page(page.text).h1 == section.title
    assert rows(page.text) == list(section.product_ids)
    assert 'data-section="korean-heritage"' in page.text


def test_autosuggest_returns_search_urls(visitor):
    result = visitor.get("/autosug", q="film")
    assert result.headers["content-type"] == "application/json"
    suggestions = result.json["suggestions"]
    assert suggestions[0] == {"text": "film camera", "url": "/sch/?_nkw=film+camera"}
    assert visitor.get("/autosug").json == {"q": "", "suggestions": []}


def test_item_page_parts(visitor, catalog):
    p = item_where(catalog, accepts_offers=True, category="cameras")
    result = visitor.get(f"/itm/{p.id}")
    page = Page(result.text)
    assert ("article", {"data-product": str(p.id)}) in page.tags
    assert page.h1 == p.title
    assert {"item-specifics", "seller", "offer", "ask-seller", "similar-items", "feedback"} <= set(page.sections())
    assert page.link("Visit store")["href"] == "/sch/?" + urlencode({"_nkw": p.seller})
    assert f"{p.seller_feedback:.1f}% positive feedback" in result.text
    assert page.link("Cameras & Photo")["href"] == "/b/cameras"
    fields = page.named("input") | page.named("textarea") | page.named("select")
    assert {"item_id", "var", "qty", "offer_price", "message", "subject"} <= fields
    for label in ("Quantity", "Your offer (USD)", "Message to seller (optional)", "Subject", "Your question"):
        assert f">{label}</label>" in result.text
    for button in ("Add to cart", "Add to Watchlist", "Make offer", "Send question"):
        assert f">{button}</button>" in result.text
    assert "or Best Offer" in result.text
    for subject in ("Shipping", "Item details", "Payment", "Returns", "Other"):
        assert f'<option value="{subject}"' in result.text

    no_offers = visitor.get(f"/itm/{item_where(catalog, accepts_offers=False).id}")
    assert "offer" not in Page(no_offers.text).sections() and "Make offer" not in no_offers.text


def test_item_specifics_name_each_feature_need_and_brand(visitor, catalog):
    def carries(kind, colon):
        return next(p for p in catalog.products(SITE) if any(
            f.kind == kind and (": " in f.label) == colon for f in map(lambda s: catalog.facet(SITE, s), p.facets)))

    for p in {carries("feature", True), carries("feature", False), carries("need", False), carries("need", True)}:
        text = visitor.get(f"/itm/{p.id}").text
        specifics = re.search(r'data-section="item-specifics".*?</section>', text, re.S)[0]
        expected = [("Condition", CONDITION_TEXT[p.condition])]
        for facet in (catalog.facet(SITE, slug) for slug in p.facets):
            name, colon, value = facet.label.partition(": ")
            if facet.kind == "feature" and colon:
                expected.append((name, value))
            elif facet.kind in ("feature", "need", "brand"):
                expected.append(({"feature": "Feature", "need": "Collection", "brand": "Brand"}[facet.kind],
                                 facet.label))
        for name, value in expected:
            assert f"<tr><th>{html.escape(name)}</th><td>{html.escape(value)}</td></tr>" in specifics, p.id


def test_variants_change_the_price(visitor, catalog):
    p = next(p for p in catalog.products(SITE) if any(v.price_delta_cents for v in catalog.variants(p.id)))
    variants = catalog.variants(p.id)
    n = next(i for i, v in enumerate(variants) if v.price_delta_cents)
    text = visitor.get(f"/itm/{p.id}", var=str(n)).text
    assert f"${(p.price_cents + variants[n].price_delta_cents) / 100:,.2f}" in text
    assert f'<a href="/itm/{p.id}?var={n}" aria-current="true">' in text
    assert '<input type="hidden" name="var" value="%d">' % n in text


def test_offer_is_validated_and_confirmed(visitor, catalog):
    p = item_where(catalog, accepts_offers=True)
    for amount, problem in [("abc", "like 85 or 85.50"), ("", "offer price"), ("0", "more than $0.00"),
                            (f"{p.price_cents * 2 / 100 + 0.01:.2f}", "at most"), ("85.555", "like 85"),
                            ("-5", "like 85")]:
        result = visitor.post(f"/itm/{p.id}/offer", {"offer_price": amount})
        assert result.status_code == 400 and problem in result.text, amount
    long = visitor.post(f"/itm/{p.id}/offer", {"offer_price": "1", "message": "x" * 1001})
    assert long.status_code == 400
    refused = visitor.post(f"/itm/{item_where(catalog, accepts_offers=False).id}/offer", {"offer_price": "1"})
    assert refused.status_code == 400 and "This seller does not accept offers" in refused.text
    assert visitor.post("/itm/999999999999/offer", {"offer_price": "1"}).status_code == 404

    for amount, shown in [("$1", "$1.00"), ("1.5", "$1.50"), ("1", "$1.00")]:
        sent = visitor.post(f"/itm/{p.id}/offer", {"offer_price": amount, "message": "Would you take this?"})
        assert sent.status_code == 303 and sent.headers["location"].endswith(f"/itm/{p.id}?offer=sent")
        page = visitor.get(f"/itm/{p.id}", offer="sent")
        assert f"Your offer of {shown} was sent to {p.seller}" in page.text
    assert "Your offer of" not in Visitor(visitor.client.app).get(f"/itm/{p.id}", offer="sent").text


def test_question_is_validated_and_echoed_escaped(visitor, catalog):
    p = catalog.products(SITE)[3]
    assert visitor.post(f"/itm/{p.id}/ask", {"subject": "Gossip", "message": "hi"}).status_code == 400
    assert visitor.post(f"/itm/{p.id}/ask", {"subject": "Shipping", "message": "  "}).status_code == 400
    assert visitor.post(f"/itm/{p.id}/ask", {"subject": "Shipping", "message": "x" * 2001}).status_code == 400
    asked = visitor.post(f"/itm/{p.id}/ask", {"subject": "Item details", "message": "<script>alert(1)</script> ok?"})
    assert asked.status_code == 303 and asked.headers["location"].endswith(f"/itm/{p.id}?asked=1")
    page = visitor.get(f"/itm/{p.id}", asked="1").text
    assert "Your question about item details was sent to" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; ok?" in page
    assert page.count("<script") == 2  # the tracker and site.js only


def test_watchlist_and_cart_belong_to_one_visitor(app, catalog):
    alice, bob = Visitor(app), Visitor(app)
    camera, lens = catalog.search(SITE, "film camera").products[:2]
    watched = alice.post("/watch", {"item_id": camera.id})
    assert watched.status_code == 303 and watched.headers["location"].endswith("/mye/watchlist")
    assert camera.id in rows(alice.get("/mye/watchlist").text)
    assert "not watching any items" in bob.get("/mye/watchlist").text

    added = alice.post("/cart/add", {"item_id": lens.id, "var": "1", "qty": "2"})
    assert added.status_code == 303 and added.headers["location"].endswith("/cart")
    cart = alice.get("/cart").text
    assert f'<tr data-product="{lens.id}">' in cart and "<td>2</td>" in cart
    assert "any items in your cart" in bob.get("/cart").text
    bob.post("/cart/add", {"item_id": camera.id})
    assert f'data-product="{camera.id}"' not in alice.get("/cart").text

    removed = alice.post("/cart/remove", {"item_id": lens.id, "var": "1"})
    assert removed.status_code == 303
    assert "any items in your cart" in alice.get("/cart").text
    for bad in ({"item_id": "x"}, {"item_id": "999999999999"}, {"item_id": lens.id, "qty": "0"},
                {"item_id": lens.id, "qty": "100"}, {"item_id": lens.id, "var": "9"}, {}):
        assert alice.post("/cart/add", bad).status_code == 400, bad
    form = alice.client.simulate_post("/cart/add", headers={"Host": SITE, "Content-Type": "application/json"},
                                      body='{"item_id": 1}')
    assert form.status_code == 415 and TRACKER_TAG in form.text


def test_checkout_places_an_order_and_validates(visitor, catalog):
    assert "Your cart is empty" in visitor.get("/checkout").text
    empty = visitor.post("/checkout", {"full_name": "A", "address_line1": "1 Main St", "city": "X", "postal_code": "1"})
    assert empty.status_code == 400 and "cart is empty" in empty.text

    p = catalog.search(SITE, "film camera").products[5]
    visitor.post("/cart/add", {"item_id": p.id, "qty": "3"})
    form = visitor.get("/checkout").text
    for name in ("full_name", "address_line1", "address_line2", "city", "state", "postal_code"):
        assert f'name="{name}"' in form
    assert '<textarea id="note_to_seller" name="note_to_seller"' in form and ">Confirm and pay</button>" in form
    details = {"full_name": "Dana <b>Kim</b>", "address_line1": "12 Elm St", "address_line2": "",
               "city": "Tulsa", "state": "OK", "postal_code": "74103", "note_to_seller": "Leave at the door"}
    for missing, words in [("full_name", "full name"), ("address_line1", "address line1"), ("city", "city"),
                           ("postal_code", "postal code")]:
        result = visitor.post("/checkout", {**details, missing: " "})
        assert result.status_code == 400 and words in result.text, missing
    assert visitor.post("/checkout", {**details, "postal_code": "1" * 21}).status_code == 400
    assert visitor.post("/checkout", {**details, "note_to_seller": "n" * 1001}).status_code == 400

    placed = visitor.post("/checkout", details)
    assert placed.status_code == 303
    order_path = urlsplit(placed.headers["location"]).path
    assert re.fullmatch(r"/ord/[\w-]+", order_path)
    order = visitor.get(order_path)
    assert order.status_code == 200 and "Your order is placed" in order.text
    assert "Dana &lt;b&gt;Kim&lt;/b&gt;" in order.text and "Leave at the door" in order.text
    assert f'<tr data-product="{p.id}">' in order.text and f"${p.price_cents * 3 / 100:,.2f}" in order.text
    assert "any items in your cart" in visitor.get("/cart").text
    assert Visitor(visitor.client.app).get(order_path).status_code == 404  # another visitor's order


@pytest.mark.parametrize("path", ["/b/no-such-category", "/e/no-such-collection", "/itm/999999999999",
                                  "/itm/10001", "/itm/abc", "/itm/3040000000011", "/ord/001-ABCDEF", "/nope",
                                  "/sch", "/sch/i.html"])
def test_not_found_pages(visitor, path):
    result = visitor.get(path)
    assert result.status_code == 404
    assert TRACKER_TAG in result.text and 'data-section="error"' in result.text


def test_a_shop_product_id_is_not_a_bazaar_item(visitor, catalog):
    shop_id = catalog.products("shop.test")[0].id
    assert visitor.get(f"/itm/{shop_id}").status_code == 404
    assert visitor.post("/watch", {"item_id": shop_id}).status_code == 400


@pytest.mark.parametrize("query", ["_pgn=0", "_pgn=abc", "_pgn=9999", "_pgn=-1", "_pgn=" + "9" * 5000,
                                   "_sop=cheapest", "LH_ItemCondition=mint", "_aspect=no-such-facet",
                                   "_aspect=used", "_aspect=rating-4-up", "_sacat=no-such-category",
                                   "_nkw=" + "a" * 8193])
def test_bad_search_parameters_are_400_pages(visitor, query):
    result = visitor.get("/sch/", query_string=query)
    assert result.status_code == 400
    assert TRACKER_TAG in result.text and 'data-section="error"' in result.text


def test_a_refused_checkout_form_gives_no_visitor_cookie(app):
    """The storefront reads a checkout's form before it gives a visitor a cookie, on both sites
    (bazaar.test gave the cookie first until it became one storefront with shop.test)."""
    fresh = falcon.testing.TestClient(app).simulate_post(
        "/checkout", body="{}", headers={"Host": SITE, "Content-Type": "application/json"})
    assert fresh.status_code == 415 and "visitor" not in fresh.cookies


def test_bad_variant_is_400(visitor, catalog):
    p = catalog.products(SITE)[0]
    for var in ("9", "x", "-1", "1.0"):
        assert visitor.get(f"/itm/{p.id}", var=var).status_code == 400


def test_unicode_long_and_hostile_queries(visitor):
    for words in ("café ñandú 東京 カメラ 📷", "\u202etxet", "x" * 20, "%00 OR 1=1; --", '"AND" NEAR(a b)'):
        result = visitor.get("/sch/", _nkw=words)
        assert result.status_code == 200, words
    long = " ".join(["camera"] * 1170)
    assert len(long.encode()) <= 8192
    assert visitor.get("/sch/", _nkw=long).status_code == 200
    hostile = visitor.get("/sch/", _nkw='<script>alert("x")</script>')
    assert hostile.status_code == 200
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in hostile.text
    assert hostile.text.count("<script") == 2
    unicode = visitor.get("/sch/", _nkw="café")
    assert "café" in Page(unicode.text).h1


def test_odd_requests_never_fail_with_500(visitor, catalog):
    rng = random.Random(7)
    item = catalog.products(SITE)[0].id
    keys = ["_nkw", "_sacat", "LH_ItemCondition", "_aspect", "_sop", "_pgn", "var", "q", "offer", "asked"]
    values = ["", " ", "0", "1", "-1", "2", "9" * 30, "used", "slr", "cameras", "price-asc", "\u0000", "%ff",
              "😀", "<b>", "a" * 300, "&", "=", "+", "%2F", "..", "Ω", "%ED%A0%80", "%C0%AF"]
    paths = ["/sch/", "/b/cameras", "/b/%00", "/e/deals", f"/itm/{item}", "/autosug", "/cart",
             "/mye/watchlist", "/checkout", "/ord/x", "/itm/00000000000%31", "/b/%ff", "/e/%ED%A0%80"]
    for _ in range(300):
        query = "&".join(f"{rng.choice(keys)}={rng.choice(values)}" for _ in range(rng.randint(0, 5)))
        path = rng.choice(paths)
        result = visitor.get(path, query_string=query)
        assert result.status_code < 500, (path, query)
    for path in ["/watch", "/cart/add", "/cart/remove", "/checkout", f"/itm/{item}/offer", f"/itm/{item}/ask"]:
        for _ in range(15):
            form = {rng.choice(["item_id", "var", "qty", "offer_price", "message", "subject", "full_name"]):
                    rng.choice(values) for _ in range(rng.randint(0, 4))}
            assert visitor.post(path, form).status_code < 500, (path, form)
    assert visitor.client.simulate_request("DELETE", "/cart", headers={"Host": SITE}).status_code == 405


def test_event_log_and_site_script(visitor):
    assert visitor.client.simulate_post("/_log", headers={"Host": SITE}, body='{"t":"view"}').status_code == 204
    script = visitor.get("/_static/site.js")
    assert script.status_code == 200 and "data-suggest" in script.text


def test_urls_follow_the_grammar(visitor):
    """Every link on a results page stays within the documented URL grammar."""
    page = Page(visitor.get("/sch/", _nkw="film camera", LH_ItemCondition="used").text)
    allowed = {"_nkw", "_sacat", "LH_ItemCondition", "_aspect", "_sop", "_pgn"}
    for a in page.links:
        parts = urlsplit(a["href"])
        assert re.match(r"^/($|sch/|b/|e/|itm/\d{12}|mye/watchlist|cart)", parts.path), a
        if parts.path == "/sch/":
            assert {k for k, _ in parse_qsl(parts.query)} <= allowed
        assert a["text"].strip(), a  # every link has visible text
