"""The sites in real Chromium through the real proxy: what a user does shows up in the capture log.

One origins + proxy stack and one browser serve the whole module; each test acts like a shopper
(typing, scrolling, clicking, filling forms) and then reads the records the proxy wrote.
"""

import time
from urllib.parse import parse_qs
from urllib.parse import urlsplit

import pytest

from cdp import launch
from spillage.audit.actions import ActionBuilder
from spillage.origins.knowledge import site_profiles
from spillage.origins.catalog import Catalog
from spillage.addons.mitm.ca import ensure_ca
from spillage.proxy.capturelog import TornLineError
from spillage.proxy.capturelog import iter_records
from spillage.proxy.signing import load_or_create_key
from spillage.runner.stack import Stack

pytestmark = pytest.mark.e2e
SHOP = "https://shop.test"
BAZAAR = "https://bazaar.test"


class Session:
    """The running stack, the browser behind it, and the records captured so far."""

    def __init__(self, stack: Stack, browser, folder, catalog):
        self.stack, self.browser, self.folder, self.catalog = stack, browser, folder, catalog

    def records(self) -> list[dict]:
        """The records written so far (the proxy may be writing the last line this very moment)."""
        found = []
        try:
            for line in iter_records(self.folder):
                found.append(line.record)
        except TornLineError:
            pass
        return found

    def wait_records(self, predicate, what: str, after: int = 0, timeout: float = 10.0,
                     until=bool) -> list[dict]:
        """Records with seq > `after` matching `predicate`, waiting until `until` holds of them (by
        default: there is at least one). Beacons are asynchronous: the first one of several may reach
        the proxy well before the others, so a test waits for all it needs, never for a while."""
        deadline = time.monotonic() + timeout
        while True:
            found = [r for r in self.records() if r["seq"] > after and predicate(r)]
            if until(found):
                return found
            if time.monotonic() > deadline:
                got = f"; got {len(found)}, the last: {found[-1]}" if found else ""
                raise AssertionError(f"no {what} in the capture log after {timeout}s{got}")
            time.sleep(0.1)

    def last_seq(self) -> int:
        records = self.records()
        return records[-1]["seq"] if records else 0


@pytest.fixture(scope="module")
def session(tmp_path_factory, catalog_file):
    root = tmp_path_factory.mktemp("sites")
    ca = ensure_ca(root / "ca")
    folder = root / "session"
    folder.mkdir()
    with Stack(folder, ca, load_or_create_key(root), catalog_file, log=lambda message: None) as stack:
        proxy = stack.proxy_url.removeprefix("http://")
        args = [f"--proxy-server={proxy}", f"--ignore-certificate-errors-spki-list={ca.spki_pin}"]
        with launch(args) as browser:
            yield Session(stack, browser, folder, catalog_file)


def beacons(event: str, host: str | None = None):
    """A predicate for beacon records of `event` (sent to `host`, when given)."""
    return lambda r: (r["kind"] == "beacon" and r["event"] == event
                      and (host is None or urlsplit(r["url"]).hostname == host))


def test_typing_in_the_search_box_sends_suggest_requests_and_keystrokes(session):
    browser, start = session.browser, session.last_seq()
    browser.goto(f"{SHOP}/")
    browser.click("form[role=search] input[type=search]")
    browser.type("gooseneck", delay=0.12)

    def queries(requests: list[dict]) -> list[str]:
        return [parse_qs(urlsplit(r["url"]).query)["q"][0] for r in requests]

    suggests = session.wait_records(
        lambda r: r["kind"] == "request" and urlsplit(r["url"]).path == "/suggest",
        "suggest request for the whole word", start, until=lambda found: "gooseneck" in queries(found))
    typed = queries(suggests)
    assert len(set(typed)) >= 3 and all("gooseneck".startswith(q) for q in typed)
    browser.wait_for("document.querySelector('ul.suggestions li a') !== null")
    keys = session.wait_records(
        beacons("keys"), "keys beacon from the tracker ending in the whole word", start,
        until=lambda found: bool(found) and found[-1]["data"]["entries"][-1]["value"] == "gooseneck")
    assert keys[0]["url"].startswith("https://metrics.test/")
    assert keys[-1]["data"]["entries"][-1]["value"] == "gooseneck"


def test_scrolling_results_sends_impressions_of_products_and_sections(session):
    browser, start = session.browser, session.last_seq()
    browser.goto(f"{SHOP}/s?k=gooseneck+kettle")
    shown = set(browser.eval("[...document.querySelectorAll('[data-results] [data-product]')]"
                             ".map(e => e.getAttribute('data-product'))"))
    for _ in range(6):
        browser.eval("window.scrollBy(0, 500)")
        time.sleep(0.4)

    def dwelt_on_products_and_sections(found: list[dict]) -> bool:
        items = [i for r in found for i in r["data"]["items"]]
        return bool({i["id"] for i in items if i["kind"] == "product"} & shown
                    and {i["id"] for i in items if i["kind"] == "section"} & {"results", "filters"}
                    and any(i["ms"] > 0 for i in items))

    impressions = session.wait_records(  # the tracker flushes impressions every 2 s
        beacons("impression", "metrics.test"), "impression beacons of shown products and of a section", start,
        until=dwelt_on_products_and_sections)
    items = [i for r in impressions for i in r["data"]["items"]]
    seen_products = {i["id"] for i in items if i["kind"] == "product"}
    assert seen_products & shown
    assert {i["id"] for i in items if i["kind"] == "section"} & {"results", "filters"}
    assert all(i["ms"] >= 0 for i in items) and any(i["ms"] > 0 for i in items)
    scrolls = session.wait_records(beacons("scroll"), "scroll beacon deeper than 30%", start,
                                   until=lambda found: any(r["data"]["depth"] > 30 for r in found))
    assert max(r["data"]["depth"] for r in scrolls) > 30


def test_clicking_a_facet_sends_a_click_beacon_and_navigates(session):
    browser, start = session.browser, session.last_seq()
    browser.goto(f"{SHOP}/s?k=kettle")
    browser.click('a[data-facet="gooseneck"]')
    navigation = session.wait_records(
        lambda r: r["kind"] == "request" and "gooseneck" in parse_qs(urlsplit(r["url"]).query).get("f", []),
        "navigation to the filtered results", start)[0]
    clicks = session.wait_records(  # the first of the two may reach the proxy well before the other
        lambda r: beacons("click")(r) and r["data"].get("facet") == "gooseneck",
        "click beacons naming the facet from both metrics.test and shop.test", start,
        until=lambda found: {urlsplit(r["url"]).hostname for r in found} >= {"metrics.test", "shop.test"})
    observers = {urlsplit(r["url"]).hostname for r in clicks}
    assert observers == {"metrics.test", "shop.test"}  # the tracker and the shop's own log
    assert all(parse_qs(urlsplit(c["data"]["href"]).query)["f"] == ["gooseneck"] for c in clicks)
    # sendBeacon is asynchronous: a beacon may reach the proxy just before or just after the
    # navigation it announces; either way the audit makes them one select action
    builder = ActionBuilder(site_profiles(session.catalog), session.folder)
    for record in session.records():
        builder.add(record)
    (facet,) = [a for a in builder.finish() if navigation["seq"] in a.evidence]
    assert (facet.what, facet.kind, facet.detail) == ("filter", "select", {"facet": "gooseneck"})
    assert {c["seq"] for c in clicks} <= set(facet.evidence) and set(facet.observers) == observers


def test_checkout_submits_a_form_record_with_every_field(session):
    browser, start = session.browser, session.last_seq()
    catalog = Catalog(session.catalog)
    product = catalog.search("shop.test", "kettle").products[0]
    browser.goto(f"{SHOP}/p/{product.id}")
    browser.click('form[action="/cart/add"] button[type=submit]')
    session.wait_records(lambda r: r["kind"] == "form" and r["url"] == f"{SHOP}/cart/add", "cart form", start)
    browser.wait_for("location.pathname === '/cart'")
    browser.goto(f"{SHOP}/checkout")
    typed = {"full_name": "Dana Weiss", "address_line1": "12 Elm Street", "city": "Pittsburgh",
             "postal_code": "15213", "delivery_instructions": "Leave it with the doorman, I'm pregnant",
             "gift_message": "Happy birthday — ünïcode ✓"}
    for name, text in typed.items():
        browser.click(f"#{name}")
        browser.eval("document.activeElement.value = ''")
        browser.type(text)
    browser.click('form[action="/checkout"] button[type=submit]')
    form = session.wait_records(lambda r: r["kind"] == "form" and r["url"] == f"{SHOP}/checkout",
                                "checkout form record", start)[0]
    assert typed.items() <= dict(form["fields"]).items()
    browser.wait_for("location.pathname.startsWith('/order/') && document.body.innerText.includes('doorman')")
    fields = session.wait_records(lambda r: beacons("field")(r) and r["data"].get("name") == "delivery_instructions"
                                  and r["data"].get("action") == "change", "field change beacon", start)
    assert fields[-1]["data"]["value"] == typed["delivery_instructions"]


def test_bazaar_offer_message_is_a_form_record(session):
    browser, start = session.browser, session.last_seq()
    catalog = Catalog(session.catalog)
    item = next(p for p in catalog.search("bazaar.test", "film camera", per_page=100).products if p.accepts_offers)
    browser.goto(f"{BAZAAR}/itm/{item.id}")
    browser.click("#offer-price")
    browser.type(str(item.price_cents // 200))
    browser.click("#offer-message")
    browser.type("Would you take less? Money is tight since I got fired.")
    browser.click(f'form[action="/itm/{item.id}/offer"] button[type=submit]')
    form = session.wait_records(lambda r: r["kind"] == "form" and r["url"] == f"{BAZAAR}/itm/{item.id}/offer",
                                "offer form record", start)[0]
    assert dict(form["fields"])["message"].endswith("since I got fired.")
    browser.wait_for("document.body.innerText.includes('Your offer of')")


def test_a_results_page_without_more_results_fetches_nothing_more(session):
    """site.js used to request `<path>/null` when a results list had no next page."""
    browser, start = session.browser, session.last_seq()
    browser.goto(f"{SHOP}/s?k=gooseneck+kettle+cordless+variable+temperature&f=gooseneck")
    assert browser.eval("document.querySelector('[data-results]').getAttribute('data-next')") is None
    for _ in range(6):
        browser.eval("window.scrollBy(0, 800)")
        time.sleep(0.3)
    time.sleep(1.5)
    urls = [r["url"] for r in session.records() if r["seq"] > start and r["kind"] == "request"]
    assert urls and not [u for u in urls if urlsplit(u).path.endswith("/null")]


def test_a_click_inside_a_section_reports_the_element_s_own_text(session):
    """Not the whole section's text (which may hold what was asked on the page)."""
    browser, start = session.browser, session.last_seq()
    browser.goto(f"{SHOP}/")
    section = browser.eval("document.querySelector('[data-section] h2') !== null")
    assert section
    browser.eval("(() => { const h = document.querySelector('[data-section] h2'); h.scrollIntoView(); "
                 "h.click(); return h.textContent; })()")
    clicks = session.wait_records(lambda r: beacons("click", "shop.test")(r) and r["data"].get("section"),
                                  "the shop's click beacon from a section", start)
    heading = browser.eval("document.querySelector('[data-section] h2').textContent").strip()
    assert clicks[-1]["data"]["label"] == " ".join(heading.split())[:200]
