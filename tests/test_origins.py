"""Tests for the local origins: catalog, shop.test, metrics.test, host dispatch, server."""

import selectors
import subprocess
import sys
import urllib.error
import urllib.request
from html.parser import HTMLParser

import falcon.testing
import pytest

from spillage.origins.app import make_app
from spillage.origins.catalog import Catalog, build_catalog
from spillage.origins.knowledge import site_profiles
from spillage.origins.server import main as server_main

TRACKER_TAG = '<script src="https://metrics.test/t.js" async></script>'


class Page(HTMLParser):
    """Links (attrs + text), form inputs and h1 text of an HTML page."""

    def __init__(self, text):
        super().__init__()
        self.links, self.forms, self.inputs, self.h1 = [], [], [], ""
        self._link = None
        self._in_h1 = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "a":
            self._link = {**attrs, "text": ""}
        elif tag == "form":
            self.forms.append(attrs)
        elif tag in ("input", "button"):
            self.inputs.append({"tag": tag, **attrs})
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

    def products(self):
        """Product ids of product links, in page order."""
        return [int(a["data-product"]) for a in self.links if "data-product" in a]

    def facet_links(self):
        return {a["data-facet"]: a for a in self.links if "data-facet" in a}


@pytest.fixture(scope="module")
def catalog_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("origins") / "catalog.sqlite"
    build_catalog(path)
    return path


@pytest.fixture
def client(catalog_path):
    return falcon.testing.TestClient(make_app(catalog_path))


def shop(client, path, **kw):
    return client.simulate_get(path, headers={"Host": "shop.test", **kw.pop("headers", {})}, **kw)


def add_to_cart(client, body, cookies=None):
    headers = {"Host": "shop.test", "Content-Type": "application/x-www-form-urlencoded"}
    return client.simulate_post("/cart/add", headers=headers, body=body, cookies=cookies)


def test_search_ranks_products_matching_most_query_words_first(catalog_path, client):
    ids = [p.id for p in Catalog(catalog_path).search("gooseneck kettle variable temperature", [])]
    assert ids[:2] == [101, 106]
    assert set(ids[2:]) >= {102, 103, 109}
    assert 111 not in ids  # the grinder matches no query word

    page = Page(shop(client, "/s", params={"k": "gooseneck kettle variable temperature"}).text)
    assert page.products()[:2] == [101, 106]
    assert page.h1 == 'Results for "gooseneck kettle variable temperature"'


def test_empty_query_lists_everything_and_plurals_match(catalog_path):
    catalog = Catalog(catalog_path)
    assert [p.id for p in catalog.search("", [])] == list(range(101, 113))
    assert {p.id for p in catalog.search("kettles", [])} >= {101, 102, 103, 104, 106, 107, 108, 109}


def test_facet_filter_narrows_results(catalog_path, client):
    assert [p.id for p in Catalog(catalog_path).search("", ["kosher-kitchen"])] == [105, 106]
    assert [p.id for p in Catalog(catalog_path).search("", ["kosher-kitchen", "gooseneck"])] == [106]
    page = Page(shop(client, "/s", query_string="k=kettle&f=kosher-kitchen").text)
    assert page.products() == [105, 106]
    assert [p.id for p in Catalog(catalog_path).search("", ["no-such-facet"])] == []


def test_facet_links_show_label_count_and_add_facet_to_query(client):
    facets = Page(shop(client, "/s", params={"k": "kettle"}).text).facet_links()
    kosher = facets["kosher-kitchen"]
    assert kosher["text"] == "Kosher kitchen (Sabbath mode) (2)"
    assert kosher["href"] == "/s?k=kettle&f=kosher-kitchen"
    assert facets["pregnancy-safe"]["text"] == "Pregnancy safe (BPA-free) (2)"
    assert "travel" in facets

    active = Page(shop(client, "/s", query_string="k=kettle&f=kosher-kitchen").text).facet_links()
    assert active["kosher-kitchen"]["text"] == "Remove filter: Kosher kitchen (Sabbath mode)"
    assert active["kosher-kitchen"]["href"] == "/s?k=kettle"
    assert active["gooseneck"]["text"] == "Gooseneck spout (1)"
    assert active["gooseneck"]["href"] == "/s?k=kettle&f=kosher-kitchen&f=gooseneck"
    assert "travel" not in active  # only facets present in the current results

    encoded = Page(shop(client, "/s", params={"k": "hot water & tea"}).text).facet_links()
    assert encoded["kosher-kitchen"]["href"] == "/s?k=hot+water+%26+tea&f=kosher-kitchen"


def test_category_page_lists_its_products_with_facets(client):
    page = Page(shop(client, "/c/coffee").text)
    assert page.products() == [110, 111, 112]
    assert page.facet_links()["under-40"]["href"] == "/c/coffee?f=under-40"
    assert shop(client, "/c/garden").status_code == 404


def test_no_results_message(client):
    result = shop(client, "/s", params={"k": "snowboard"})
    assert result.status_code == 200
    assert "No results" in result.text
    assert Page(result.text).products() == []


def test_product_page_has_details_and_add_to_cart_form(client):
    result = shop(client, "/p/106")
    page = Page(result.text)
    assert page.h1 == "Fenn Gooseneck Kettle with Sabbath Mode 1.0L"
    assert "$119.00" in result.text
    assert "<li>Kosher kitchen (Sabbath mode)</li>" in result.text
    assert {"action": "/cart/add", "method": "post", "data-section": "add-to-cart"} in page.forms
    fields = {i.get("name"): i for i in page.inputs if i.get("name")}
    assert fields["product_id"]["type"] == "hidden" and fields["product_id"]["value"] == "106"
    assert fields["qty"]["type"] == "number" and fields["qty"]["value"] == "1"
    assert {"tag": "button", "type": "submit"} in page.inputs
    assert ">Add to cart</button>" in result.text


def test_home_has_search_form_and_categories(client):
    result = shop(client, "/")
    page = Page(result.text)
    assert {"action": "/s", "method": "get", "role": "search"} in page.forms
    search = next(i for i in page.inputs if i.get("name") == "k")
    assert search["type"] == "search" and search["aria-label"] == "Search products"
    assert {a["href"] for a in page.links} >= {"/c/kettles", "/c/coffee", "/cart"}
    assert page.products()


def test_cart_add_sets_cookie_and_cart_lists_product(client):
    result = add_to_cart(client, "product_id=106&qty=1")
    assert result.status_code == 303
    assert result.headers["location"].endswith("/cart")
    cookie = result.cookies["cart"]
    assert cookie.http_only and cookie.path == "/" and cookie.same_site.lower() == "lax"

    again = add_to_cart(client, "product_id=106&qty=2", cookies={"cart": cookie.value})
    assert again.cookies["cart"].value == cookie.value

    cart = shop(client, "/cart", cookies={"cart": cookie.value})
    assert Page(cart.text).products() == [106]
    assert "$357.00" in cart.text  # 3 x $119.00

    assert "Your cart is empty" in shop(client, "/cart").text
    assert "Your cart is empty" in shop(client, "/cart", cookies={"cart": "forged"}).text


@pytest.mark.parametrize("body, message", [
    ("product_id=999&qty=1", "product_id must be"),
    ("product_id=abc&qty=1", "product_id must be"),
    ("qty=1", "product_id must be"),
    ("product_id=101&qty=0", "qty must be"),
    ("product_id=101&qty=100", "qty must be"),
    ("product_id=101&qty=-1", "qty must be"),
    ("product_id=101&qty=1.5", "qty must be"),
    ("product_id=101&product_id=102&qty=1", "product_id must be"),
])
def test_bad_cart_input_is_rejected(client, body, message):
    result = add_to_cart(client, body)
    assert result.status_code == 400
    assert message in result.text
    assert "set-cookie" not in result.headers


def test_cart_add_requires_form_encoding(client):
    result = client.simulate_post("/cart/add", headers={"Host": "shop.test"}, json={"product_id": 101})
    assert result.status_code == 415


@pytest.mark.parametrize("path", ["/p/999", "/p/abc", "/nowhere"])
def test_unknown_pages_are_404_html(client, path):
    result = shop(client, path)
    assert result.status_code == 404
    assert result.headers["content-type"] == "text/html; charset=utf-8"


@pytest.mark.parametrize("path", ["/", "/s?k=kettle", "/s?k=", "/c/kettles", "/p/101", "/cart", "/p/999"])
def test_every_shop_page_is_html_with_tracker(client, path):
    path, _, query = path.partition("?")
    result = shop(client, path, query_string=query)
    assert result.headers["content-type"] == "text/html; charset=utf-8"
    assert result.text.count(TRACKER_TAG) == 1


def test_query_is_html_escaped(client):
    result = shop(client, "/s", params={"k": '<script>alert("x")</script>'})
    assert result.status_code == 200
    assert "<script>alert" not in result.text
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in result.text
    assert result.text.count("<script") == 1  # only the tracker


@pytest.mark.parametrize("host", ["shop.test:443", "SHOP.TEST", "shop.test."])
def test_host_header_is_normalised(client, host):
    assert client.simulate_get("/", headers={"Host": host}).status_code == 200


@pytest.mark.parametrize("host", ["evil.example", "bazaar.test:8080", "127.0.0.1"])
def test_unknown_host_is_misdirected(client, host):
    result = client.simulate_get("/", headers={"Host": host})
    assert result.status_code == 421
    assert result.headers["content-type"] == "text/plain; charset=utf-8"
    assert repr(host.partition(":")[0]) in result.text
    assert "metrics.test, shop.test" in result.text


def test_collect_accepts_beacons_up_to_64_kib(client):
    def collect(body):
        return client.simulate_post("/collect", headers={"Host": "metrics.test",
                                    "Content-Type": "text/plain;charset=UTF-8"}, body=body)

    ok = collect('{"t":"view","page":"https://shop.test/"}')
    assert ok.status_code == 204
    assert ok.headers["access-control-allow-origin"] == "*"
    assert collect(b"x" * 65536).status_code == 204
    assert collect(b"x" * 65537).status_code == 413


def test_tracker_script_and_about_page(client):
    result = client.simulate_get("/t.js", headers={"Host": "metrics.test"})
    assert result.status_code == 200
    assert result.headers["content-type"].startswith("text/javascript")
    for needle in ("navigator.sendBeacon", "https://metrics.test/collect", '"click"', '"scroll"',
                   '"submit"', '"view"', "data-facet"):
        assert needle in result.text
    about = client.simulate_get("/", headers={"Host": "metrics.test"})
    assert about.status_code == 200 and "/collect" in about.text


def test_site_profiles_describe_the_shop(catalog_path):
    for profiles in (site_profiles(), site_profiles(catalog_path)):
        shop_profile = profiles["shop.test"]
        match = shop_profile.product_path.match("/p/106")
        product = shop_profile.products[int(match.group(1))]
        assert product.title == "Fenn Gooseneck Kettle with Sabbath Mode 1.0L"
        assert product.price_cents == 11900
        assert "kosher-kitchen" in product.facets
        assert shop_profile.facets["kosher-kitchen"] == "Kosher kitchen (Sabbath mode)"
        assert not shop_profile.product_path.match("/p/106/reviews")
        assert (shop_profile.search_path, shop_profile.query_params, shop_profile.facet_param) == ("/s", ("k",), "f")


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.5", "example.com"])
def test_server_refuses_non_loopback_host(host, capsys):
    with pytest.raises(SystemExit) as exc:
        server_main(["--host", host])
    assert exc.value.code == 2
    assert "loopback" in capsys.readouterr().err


def test_real_server_serves_both_hosts_and_stops_cleanly():
    proc = subprocess.Popen(
        [sys.executable, "-m", "spillage.origins.server", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            assert sel.select(timeout=10), "server did not print its ready line"
        line = proc.stdout.readline()
        prefix = "spillage origins listening on http://127.0.0.1:"
        assert line.startswith(prefix), line
        base = f"http://127.0.0.1:{int(line[len(prefix):])}"

        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

        def fetch(path, host, data=None):
            request = urllib.request.Request(base + path, data=data, headers={"Host": host})
            with opener.open(request, timeout=5) as response:
                return response.status, response.headers, response.read()

        status, headers, body = fetch("/s?k=sabbath", "shop.test")
        assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
        assert Page(body.decode()).products() == [105, 106]
        status, headers, body = fetch("/t.js", "metrics.test")
        assert status == 200 and b"sendBeacon" in body
        assert fetch("/collect", "metrics.test", data=b'{"t":"view"}')[0] == 204
        with pytest.raises(urllib.error.HTTPError) as err:
            fetch("/", "elsewhere.test")
        assert err.value.code == 421
    finally:
        proc.terminate()
        out, err_text = proc.communicate(timeout=10)
    assert proc.returncode == 0, err_text
    assert out == ""  # the ready line was the only stdout output
