"""What the origins send, byte for byte: a fixed, broad list of requests to shop.test, bazaar.test and
metrics.test, replayed in order through `origins.app.make_app` over the default catalog, each answer
reduced to its status, headers and the SHA-256 of its body.

tests/fixtures/site_bytes.json holds the requests and the answers the origins gave when it was
written; tests/test_site_bytes.py replays the requests and compares. Rewrite it only when a change
of the sites' bytes is meant (and a test says why):

    .venv/bin/python tests/site_bytes.py        # writes tests/fixtures/site_bytes.json

The random parts (visitor cookies, order numbers, the tracker's id) come from a counter instead of
`secrets`, so two runs give the same bytes.
"""

import hashlib
import itertools
import json
import secrets
import sys
from contextlib import contextmanager
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import urlencode

import falcon.testing

GOLDEN = Path(__file__).resolve().parent / "fixtures" / "site_bytes.json"
FORM = "application/x-www-form-urlencoded"
SHOP, BAZAAR, METRICS = "shop.test", "bazaar.test", "metrics.test"
LOCATION = "<location>"   # a request's path: where the answer before it redirected


@contextmanager
def counted_secrets():
    """`secrets.token_urlsafe` and `token_hex` from a counter, for the length of the block."""
    counter = itertools.count(1)
    saved = secrets.token_urlsafe, secrets.token_hex

    def token_hex(n=16):
        return f"{next(counter):0{2 * n}x}"[-2 * n:]

    def token_urlsafe(n=32):
        return f"v{next(counter):0{4 * n // 3 - 1}d}"

    secrets.token_urlsafe, secrets.token_hex = token_urlsafe, token_hex
    try:
        yield
    finally:
        secrets.token_urlsafe, secrets.token_hex = saved


def get(host, path, query="", jar="a"):
    return {"method": "GET", "host": host, "path": path, "query": query, "jar": jar}


def follow(host):
    return get(host, LOCATION)


def post(host, path, form=None, body=None, content_type=FORM, jar="a"):
    body = body if body is not None else urlencode(form or {}, doseq=True)
    return {"method": "POST", "host": host, "path": path, "body": body, "content_type": content_type, "jar": jar}


def q(**params) -> str:
    return urlencode(params, doseq=True)


def first(items, default=None):
    return next(iter(items), default)


def shop_requests(catalog) -> list[dict]:
    """Every route of shop.test, good and bad input, and a visitor's cart, lists and order."""
    site = SHOP
    products = catalog.products(site)
    cats = catalog.categories(site)
    cat = cats[0].slug
    facets = [f.slug for f in catalog.facets(site)]
    brand = first(f for f in facets if f.startswith("brand-"))
    price = first(f for f in facets if f.startswith("price-"))
    feature = facets[0]
    sections = catalog.sections(site)
    theme = first(s.slug for s in sections if s.kind == "theme")
    dept = first(s.slug for s in sections if s.kind == "department")
    big = max(sections, key=lambda s: len(s.product_ids)).slug
    with_variants = first(p.id for p in products if len(catalog.variants(p.id)) > 1)
    without_variants = first((p.id for p in products if not catalog.variants(p.id)), products[-1].id)
    without_reviews = first((p.id for p in products if not catalog.reviews(p.id)), products[-1].id)
    without_questions = first((p.id for p in products if not catalog.questions(p.id)), products[-1].id)
    discounted = first((p.id for p in products if p.list_price_cents > p.price_cents), products[1].id)
    pid = products[0].id
    text = str(pid)
    word = products[0].title.split()[-1]
    other = catalog.products("bazaar.test")[0].id
    fullwidth = "".join(chr(ord(d) + 0xFEE0) for d in text)
    return [
        get(site, "/", jar="fresh"), get(site, "/"),
        get(site, "/s"), get(site, "/s", q(k=word)), get(site, "/s", q(k="gooseneck kettle")),
        get(site, "/s", q(k=word, sort="price-asc")), get(site, "/s", q(k=word, sort="price-desc")),
        get(site, "/s", q(k=word, sort="rating")), get(site, "/s", q(k=word, sort="newest")),
        get(site, "/s", q(k="", page=2)), get(site, "/s", q(page=3, sort="newest")),
        get(site, "/s", q(k=word, i=cat)), get(site, "/s", q(i=cat)), get(site, "/s", q(i="no-such-department")),
        get(site, "/s", q(f=[brand, price])), get(site, "/s", q(k=word, f=feature, sort="rating")),
        get(site, "/s", q(f=[brand, brand])), get(site, "/s", q(f="no-such-filter")),
        get(site, "/s", q(f=[f"x{i}" for i in range(21)])), get(site, "/s", q(sort="cheapest")),
        get(site, "/s", q(page=0)), get(site, "/s", q(page=99999)), get(site, "/s", q(page="２")),
        get(site, "/s", q(page="abc")), get(site, "/s", q(k="zzqx nothing matches this")),
        get(site, "/s", q(k="x" * 8193)), get(site, "/s", q(k="café <b>&\"'")), get(site, "/s", "k=%FF%FE"),
        get(site, f"/c/{cat}"), get(site, f"/c/{cat}", q(f=brand, sort="price-asc")),
        get(site, f"/c/{cats[1].slug}", q(page=2)), get(site, f"/c/{cat}", q(k="ignored")),
        get(site, f"/c/{cat}", q(sort="bad")), get(site, "/c/no-such-department"),
        get(site, f"/b/{theme}"), get(site, f"/b/{dept}"), get(site, "/b/deals"), get(site, f"/b/{big}", q(page=2)),
        get(site, f"/b/{theme}", q(page=0)), get(site, f"/b/{theme}", q(page=50)), get(site, "/b/no-such-section"),
        get(site, f"/p/{pid}"), get(site, f"/p/{with_variants}", q(variant=1)),
        get(site, f"/p/{with_variants}", q(variant=99)), get(site, f"/p/{with_variants}", q(variant="x")),
        get(site, f"/p/{without_variants}"), get(site, f"/p/{without_variants}", q(variant=0)),
        get(site, f"/p/{without_reviews}"), get(site, f"/p/{without_questions}"), get(site, f"/p/{discounted}"),
        get(site, f"/p/{pid}", q(review_kw="great")), get(site, f"/p/{pid}", q(review_kw="zzqx")),
        get(site, f"/p/{pid}", q(review_kw="x" * 201)), get(site, f"/p/{pid}", q(asked=1)),
        get(site, "/p/%31%30"), get(site, "/p/" + "".join(f"%{ord(c):02X}" for c in text)), get(site, f"/p/+{pid}"),
        get(site, f"/p/{fullwidth}"), get(site, f"/p/{text[:1]}_{text[1:]}"), get(site, f"/p/{pid}.0"),
        get(site, "/p/abc"), get(site, "/p/0"), get(site, "/p/-1"), get(site, "/p/99999999"), get(site, f"/p/{other}"),
        get(site, f"/p/{2**62}"), get(site, "/p/" + "9" * 40),
        post(site, f"/p/{pid}/ask", {"question": "Does it fit a small kitchen?"}), get(site, f"/p/{pid}", q(asked=1)),
        post(site, f"/p/{pid}/ask", {"question": "  "}), post(site, f"/p/{pid}/ask", {"question": "x" * 1001}),
        post(site, f"/p/{pid}/ask", body='{"question": "json"}', content_type="application/json"),
        post(site, "/p/99999999/ask", {"question": "hello"}), get(site, f"/p/{pid}/ask"),
        get(site, "/cart"), get(site, "/lists"), get(site, "/checkout"),
        post(site, "/checkout", {"full_name": "A"}),
        post(site, "/cart/add", {"product_id": pid}),
        post(site, "/cart/add", {"product_id": with_variants, "qty": 2, "variant": 1}),
        post(site, "/cart/add", {"product_id": with_variants, "qty": 99, "variant": 1}),
        post(site, "/cart/add", {"product_id": discounted, "qty": " 3 "}),
        post(site, "/cart/add", {"product_id": without_variants, "variant": 0}),
        post(site, "/cart/add", {"product_id": pid, "qty": 0}), post(site, "/cart/add", {"product_id": pid, "qty": 100}),
        post(site, "/cart/add", {"product_id": "abc"}), post(site, "/cart/add", {"product_id": other}),
        post(site, "/cart/add", {"product_id": with_variants, "variant": 99}), post(site, "/cart/add", {}),
        post(site, "/cart/add", body="product_id=1", content_type="text/plain"),
        get(site, "/cart"), get(site, "/cart/add"),
        post(site, "/cart/remove", {"product_id": discounted, "variant": ""}),
        post(site, "/cart/remove", {"product_id": "x"}), get(site, "/cart"),
        post(site, "/list/add", {"product_id": pid, "list": "Wish list"}),
        post(site, "/list/add", {"product_id": with_variants, "list": "Baby registry"}),
        post(site, "/list/add", {"product_id": pid, "list": "Wish list"}),
        post(site, "/list/add", {"product_id": pid, "list": "Nope"}), get(site, "/lists"),
        get(site, "/checkout"), post(site, "/checkout", {"full_name": "Ada"}),
        post(site, "/checkout", {"full_name": "Ada", "address_line1": "1 Main St", "city": "Springfield",
                                 "postal_code": "x" * 21}),
        post(site, "/checkout", {"full_name": "Ada Lovelace", "address_line1": "1 Main St", "address_line2": "Apt 2",
                                 "city": "Springfield", "state": "IL", "postal_code": "62701",
                                 "delivery_instructions": "Leave it with the neighbour", "gift": "1",
                                 "gift_message": "Happy birthday"}),
        follow(site), get(site, "/order/001-000000"), get(site, "/order/no-such-order"), get(site, "/cart"),
        get(site, "/checkout"),
        post(site, "/cart/add", {"product_id": pid}),
        post(site, "/checkout", {"full_name": "Bo", "address_line1": "2 Side St", "city": "Town", "postal_code": "1"}),
        follow(site), get(site, "/suggest", q(q=word[:3])), get(site, "/suggest", q(q="")), get(site, "/suggest"),
        get(site, "/suggest", q(q="x" * 300)),
        post(site, "/_log", body='{"type":"view"}', content_type="application/json"),
        post(site, "/_log", body="x" * (64 * 1024 + 1), content_type="text/plain"), get(site, "/_log"),
        get(site, "/_static/site.js"), get(site, "/_static/t.js"), get(site, "/no-such-page"),
        get(site, "/itm/304000000001"), {**get(site, "/"), "method": "DELETE"}, {**get(site, "/s"), "method": "HEAD"},
        get(site, "/cart", jar="fresh"),
    ]


def bazaar_requests(catalog) -> list[dict]:
    """Every route of bazaar.test, good and bad input, and a visitor's watchlist, offers, cart and order."""
    site = BAZAAR
    products = catalog.products(site)
    cats = catalog.categories(site)
    cat = cats[0].slug
    facets = catalog.facets(site)
    aspect = first(f.slug for f in facets if f.kind == "feature")
    need = first((f.slug for f in facets if f.kind == "need"), aspect)
    brand = first(f.slug for f in facets if f.kind == "brand")
    price = first(f.slug for f in facets if f.kind == "price")
    rating = first((f.slug for f in facets if f.kind == "rating"), "rating-4-up")
    sections = catalog.sections(site)
    theme = first(s.slug for s in sections if s.kind == "theme")
    big = max(sections, key=lambda s: len(s.product_ids)).slug
    item = products[0]
    with_variants = first(p.id for p in products if len(catalog.variants(p.id)) > 1)
    without_variants = first((p.id for p in products if not catalog.variants(p.id)), products[-1].id)
    no_offers = first((p.id for p in products if not p.accepts_offers), products[-1].id)
    offers = first(p for p in products if p.accepts_offers)
    without_reviews = first((p.id for p in products if not catalog.reviews(p.id)), products[-1].id)
    without_questions = first((p.id for p in products if not catalog.questions(p.id)), products[-1].id)
    word = item.title.split()[-1]
    text = str(item.id)
    fullwidth = "".join(chr(ord(d) + 0xFEE0) for d in text)
    shop_id = catalog.products(SHOP)[0].id
    return [
        get(site, "/", jar="fresh"), get(site, "/"),
        get(site, "/sch/"), get(site, "/sch/", q(_nkw=word)), get(site, "/sch/", q(_nkw="film camera")),
        get(site, "/sch/", q(_nkw=word, _sop="price-asc")), get(site, "/sch/", q(_nkw=word, _sop="price-desc")),
        get(site, "/sch/", q(_nkw=word, _sop="rating")), get(site, "/sch/", q(_nkw=word, _sop="newest")),
        get(site, "/sch/", q(_pgn=2)), get(site, "/sch/", q(_pgn=3, _sop="newest")),
        get(site, "/sch/", q(_nkw=word, _sacat=cat)), get(site, "/sch/", q(_sacat=cat)),
        get(site, "/sch/", q(_sacat="no-such-category")),
        get(site, "/sch/", q(LH_ItemCondition=["used", "new"])), get(site, "/sch/", q(LH_ItemCondition="mint")),
        get(site, "/sch/", q(_aspect=[aspect, need])), get(site, "/sch/", q(_aspect=[brand, price, brand])),
        get(site, "/sch/", q(_aspect=rating)), get(site, "/sch/", q(_aspect="no-such-aspect")),
        get(site, "/sch/", q(_nkw=word, LH_ItemCondition="used", _aspect=brand, _sop="rating")),
        get(site, "/sch/", q(_sop="cheapest")), get(site, "/sch/", q(_pgn=0)), get(site, "/sch/", q(_pgn=999999)),
        get(site, "/sch/", q(_pgn="２")), get(site, "/sch/", q(_nkw="zzqx nothing matches this")),
        get(site, "/sch/", q(_nkw="é" * 4097)), get(site, "/sch/", q(_nkw="café <b>&\"'")),
        get(site, "/sch"), get(site, "/sch/", "_nkw=%FF%FE"),
        get(site, f"/b/{cat}"), get(site, f"/b/{cat}", q(_aspect=brand, _sop="price-asc")),
        get(site, f"/b/{cats[1].slug}", q(_pgn=2)), get(site, f"/b/{cat}", q(_sacat=cats[1].slug)),
        get(site, f"/b/{cat}", q(_sop="bad")), get(site, "/b/no-such-category"),
        get(site, f"/e/{theme}"), get(site, f"/e/best-{cat}"), get(site, "/e/deals"), get(site, f"/e/{big}"),
        get(site, "/e/no-such-collection"),
        get(site, f"/itm/{item.id}"), get(site, f"/itm/{with_variants}", q(var=1)),
        get(site, f"/itm/{with_variants}", q(var=99)), get(site, f"/itm/{with_variants}", q(var="x")),
        get(site, f"/itm/{without_variants}"), get(site, f"/itm/{without_variants}", q(var=1)),
        get(site, f"/itm/{no_offers}"), get(site, f"/itm/{without_reviews}"), get(site, f"/itm/{without_questions}"),
        get(site, "/itm/" + "".join(f"%{ord(c):02X}" for c in text)), get(site, f"/itm/{fullwidth}"),
        get(site, f"/itm/+{text[1:]}"), get(site, f"/itm/{text[:1]}_{text[1:-1]}"), get(site, "/itm/%31%30"),
        get(site, f"/itm/{text[1:]}"), get(site, "/itm/999999999999"), get(site, f"/itm/{shop_id}"),
        get(site, "/itm/abcdefghijkl"),
        post(site, f"/itm/{offers.id}/offer", {"offer_price": "$1,2.5"}),
        post(site, f"/itm/{offers.id}/offer", {"offer_price": "85.50", "message": "Would you take this?"}),
        get(site, f"/itm/{offers.id}", q(offer="sent")),
        post(site, f"/itm/{offers.id}/offer", {"offer_price": "0"}),
        post(site, f"/itm/{offers.id}/offer", {"offer_price": "9999999"}),
        post(site, f"/itm/{offers.id}/offer", {"offer_price": ""}),
        post(site, f"/itm/{no_offers}/offer", {"offer_price": "10"}),
        post(site, f"/itm/{item.id}/ask", {"subject": "Shipping", "message": "Do you ship to Canada?"}),
        get(site, f"/itm/{item.id}", q(asked=1)), get(site, f"/itm/{item.id}", q(asked=1, offer="sent")),
        post(site, f"/itm/{item.id}/ask", {"subject": "Gossip", "message": "hi"}),
        post(site, f"/itm/{item.id}/ask", {"subject": "Other", "message": ""}),
        post(site, f"/itm/{item.id}/ask", body="subject=Other", content_type="multipart/form-data"),
        post(site, "/itm/999999999999/ask", {"subject": "Other", "message": "hi"}), get(site, f"/itm/{item.id}/ask"),
        get(site, "/mye/watchlist"), get(site, "/cart"), get(site, "/checkout"),
        post(site, "/checkout", {"full_name": "A"}),
        post(site, "/watch", {"item_id": item.id}), post(site, "/watch", {"item_id": with_variants}),
        post(site, "/watch", {"item_id": item.id}), post(site, "/watch", {"item_id": "x"}),
        post(site, "/watch", {"item_id": shop_id}), get(site, "/mye/watchlist"),
        post(site, "/cart/add", {"item_id": item.id}),
        post(site, "/cart/add", {"item_id": with_variants, "qty": 2, "var": 1}),
        post(site, "/cart/add", {"item_id": with_variants, "qty": 99, "var": 1}),
        post(site, "/cart/add", {"item_id": without_variants, "qty": " 3 "}),
        post(site, "/cart/add", {"item_id": item.id, "qty": 0}), post(site, "/cart/add", {"item_id": item.id, "qty": 100}),
        post(site, "/cart/add", {"item_id": with_variants, "var": 99}), post(site, "/cart/add", {}),
        post(site, "/cart/add", body="item_id=1", content_type="text/plain"),
        get(site, "/cart"), get(site, "/cart/add"),
        post(site, "/cart/remove", {"item_id": without_variants}), post(site, "/cart/remove", {"item_id": "x"}),
        get(site, "/cart"), get(site, "/checkout"), post(site, "/checkout", {"full_name": "Ada"}),
        post(site, "/checkout", {"full_name": "Ada", "address_line1": "1 Main St", "city": "Springfield",
                                 "postal_code": "x" * 21}),
        post(site, "/checkout", {"full_name": "Ada Lovelace", "address_line1": "1 Main St", "address_line2": "Apt 2",
                                 "city": "Springfield", "state": "IL", "postal_code": "62701",
                                 "note_to_seller": "Please pack it well"}),
        follow(site), get(site, "/ord/001-000000"), get(site, "/ord/no-such-order"), get(site, "/cart"),
        post(site, "/cart/add", {"item_id": item.id}),
        post(site, "/checkout", {"full_name": "Bo", "address_line1": "2 Side St", "city": "Town", "postal_code": "1"}),
        follow(site), get(site, "/autosug", q(q=word[:3])), get(site, "/autosug", q(q="")), get(site, "/autosug"),
        post(site, "/_log", body='{"type":"view"}', content_type="application/json"),
        post(site, "/_log", body="x" * (64 * 1024 + 1), content_type="text/plain"),
        get(site, "/_static/site.js"), get(site, "/no-such-page"), get(site, "/p/10001"),
        {**get(site, "/"), "method": "PUT"}, get(site, "/cart", jar="fresh"),
    ]


def metrics_requests() -> list[dict]:
    """The tracker: its page, script (with and without its cookie), beacons; and a host nobody serves."""
    return [
        get(METRICS, "/", jar="fresh"), get(METRICS, "/t.js", jar="fresh"), get(METRICS, "/t.js"), get(METRICS, "/t.js"),
        post(METRICS, "/collect", body='{"e":"view"}', content_type="text/plain"),
        post(METRICS, "/collect", body="x" * (64 * 1024 + 1), content_type="text/plain"),
        get(METRICS, "/collect"), get(METRICS, "/nope"),
        get("nowhere.test", "/"), get("SHOP.TEST.:8080", "/s", q(k="tent")),
    ]


def all_requests(catalog) -> list[dict]:
    return shop_requests(catalog) + bazaar_requests(catalog) + metrics_requests()


def answer(app, request: dict, jars: dict, location: str = "") -> dict:
    """Send `request` to the WSGI `app` with its jar's cookies (to `location` when its path says
    LOCATION); its status, headers and body digest."""
    if request["path"] == LOCATION:
        path, _, query = location.partition("?")
        request = {**request, "path": path, "query": query}
    jar = jars.setdefault((request["host"].lower().split(":")[0].rstrip("."), request["jar"]), {})
    headers = {"Host": request["host"]}
    if jar:
        headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in jar.items())
    if "content_type" in request:
        headers["Content-Type"] = request["content_type"]
    environ = falcon.testing.create_environ(path=request["path"], query_string=request.get("query", ""),
                                            method=request["method"], headers=headers,
                                            body=request.get("body", ""), host=request["host"].split(":")[0])
    started = {}

    def start_response(status, header_list, exc_info=None):
        started.update(status=status, headers=[list(h) for h in header_list])

    body = b"".join(app(environ, start_response))
    for name, value in started["headers"]:
        if name.lower() == "set-cookie":
            jar.update({k: m.value for k, m in SimpleCookie(value).items()})
    if request["jar"] == "fresh":
        jar.clear()
    return {**started, "sha256": hashlib.sha256(body).hexdigest(), "length": len(body)}


def replay(catalog_path) -> tuple[list[dict], list[dict]]:
    """The requests over the catalog at `catalog_path` and the origins' answers, in order."""
    from spillage.origins.app import make_app
    from spillage.origins.catalog import Catalog

    requests = all_requests(Catalog(catalog_path))
    with counted_secrets():
        app = make_app(catalog_path)
        jars: dict = {}
        answers = []
        for r in requests:
            location = dict((k.lower(), v) for k, v in answers[-1]["headers"]).get("location", "") if answers else ""
            answers.append(answer(app, r, jars, location))
        return requests, answers


def shown(request: dict) -> dict:
    """`request` as the golden file keeps it: a value longer than 200 characters by its length and digest."""
    return {k: v if not isinstance(v, str) or len(v) <= 200 else
            f"{len(v)} characters, sha256 {hashlib.sha256(v.encode()).hexdigest()}" for k, v in request.items()}


def catalog_digest(catalog_path) -> str:
    """A digest of what the catalog holds (its rows, not the file's bytes)."""
    import sqlite3

    digest = hashlib.sha256()
    with sqlite3.connect(catalog_path) as db:
        tables = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table' "
                                                 "AND name NOT LIKE '%fts%' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        for table in tables:
            digest.update(table.encode())
            for row in db.execute(f"SELECT * FROM {table} ORDER BY 1"):
                digest.update(repr(row).encode())
    return digest.hexdigest()


def main() -> None:
    import tempfile

    from spillage.origins.catalog import build_catalog

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "catalog.sqlite"
        build_catalog(path)
        requests, answers = replay(path)
        lines = [json.dumps({"request": shown(r), "answer": a}, ensure_ascii=False) for r, a in zip(requests, answers)]
        digest = catalog_digest(path)
    GOLDEN.write_text(f'{{"catalog": "{digest}", "exchanges": [\n' + ",\n".join(lines) + "\n]}\n", encoding="utf-8")
    print(f"{GOLDEN}: {len(requests)} exchanges", file=sys.stderr)


if __name__ == "__main__":
    main()
