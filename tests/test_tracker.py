"""metrics.test (the third-party tracker) and the shops' first-party site.js.

The falcon tests check the tracker's endpoints; the end-to-end test runs t.js and site.js in
headless Chromium on a fixture page that follows the shops' HTML contract (docs/TRACKING.md)
and checks what reaches the collector: keystrokes, dwell, field values, identity.
"""

import io
import json
import shutil
import threading
import time
from pathlib import Path
from socketserver import ThreadingMixIn
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import falcon.testing
import pytest
from mitmproxy import http
from mitmproxy.test import taddons
from mitmproxy.test import tflow

from spillage.addons.capture import Capture
from spillage.origins.metrics import MAX_BEACON, make_metrics
from spillage.proxy.capturelog import iter_records

FIXTURES = Path(__file__).parent / "fixtures"
STATIC = Path(__file__).resolve().parents[1] / "origins" / "static"
ENDPOINT = b"https://metrics.test/collect"
YEAR = 31536000


@pytest.fixture
def metrics():
    return falcon.testing.TestClient(make_metrics())


def collect(client, body=b'{"t":"view"}', cookies=None):
    return client.simulate_post("/collect", body=body, cookies=cookies,
                                headers={"Content-Type": "text/plain;charset=UTF-8"})


def test_script_is_served_uncached_as_javascript_and_sets_mid(metrics):
    result = metrics.simulate_get("/t.js")
    assert result.status_code == 200
    assert result.headers["content-type"] == "text/javascript; charset=utf-8"
    assert result.headers["cache-control"] == "no-store"
    assert ENDPOINT in result.content and b"navigator.sendBeacon" in result.content
    mid = result.cookies["mid"]
    assert len(mid.value) == 32
    assert (mid.path, mid.max_age, mid.secure, mid.http_only, mid.same_site) == ("/", YEAR, True, True, "None")


def test_mid_is_random_and_never_reset(metrics):
    first = metrics.simulate_get("/t.js").cookies["mid"].value
    assert metrics.simulate_get("/t.js").cookies["mid"].value != first
    again = metrics.simulate_get("/t.js", cookies={"mid": first})
    assert again.status_code == 200 and "set-cookie" not in again.headers
    assert "set-cookie" not in collect(metrics, cookies={"mid": first}).headers


def test_collect_answers_204_with_cors_and_sets_mid_when_absent(metrics):
    result = collect(metrics)
    assert result.status_code == 204
    assert result.headers["access-control-allow-origin"] == "*"
    assert result.cookies["mid"].max_age == YEAR and result.cookies["mid"].same_site == "None"


def test_collect_limits_beacons_to_64_kib(metrics):
    assert collect(metrics, b"x" * MAX_BEACON).status_code == 204
    assert collect(metrics, b"x" * (MAX_BEACON + 1)).status_code == 413


def test_about_page_says_what_is_collected(metrics):
    about = metrics.simulate_get("/").text
    for needle in ("/collect", "values", "keystrokes", "_mt_id", "mid"):
        assert needle in about


def test_scripts_build_dom_without_html_strings():
    for name in ("t.js", "site.js"):
        source = (STATIC / name).read_text()
        assert "innerHTML" not in source and "insertAdjacentHTML" not in source and "eval(" not in source


@pytest.mark.parametrize("url, event", [
    ("https://shop.test/_log", "click"),
    ("https://bazaar.test/_log", "impression"),
    ("https://metrics.test/collect", "keys"),
])
def test_first_party_log_and_tracker_are_beacons_by_default(tmp_path, url, event):
    addon = Capture()
    with taddons.context(addon) as tctx:
        tctx.configure(addon, spillage_session=str(tmp_path / "s"))
        payload = {"t": event, "page": "https://shop.test/"}
        addon.request(tflow.tflow(req=http.Request.make("POST", url, json.dumps(payload).encode())))
        addon.done()
    beacon = [r.record for r in iter_records(tmp_path / "s") if r.record["kind"] == "beacon"]
    assert [(b["url"], b["event"], b["data"]) for b in beacon] == [(url, event, payload)]


# --- end to end: the scripts in headless Chromium --------------------------------------------


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):
        pass


class FixtureSite:
    """The fixture pages, t.js (its ENDPOINT pointed here), site.js, /suggest, /_log and the
    real metrics.test app behind /t.js and /collect, on 127.0.0.1; every request is recorded."""

    def __init__(self):
        self.metrics = make_metrics()
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.server = make_server("127.0.0.1", 0, self.app, server_class=_Server,
                                  handler_class=_QuietHandler)
        self.base = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def app(self, environ, start_response):
        path, method = environ["PATH_INFO"], environ["REQUEST_METHOD"]
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        record = {"method": method, "path": path, "query": parse_qs(environ.get("QUERY_STRING", "")),
                  "body": body, "cookie": environ.get("HTTP_COOKIE", ""), "set_cookie": []}
        with self.lock:
            self.requests.append(record)
        if path in ("/t.js", "/collect"):
            return self.tracker(environ, start_response, body, record)
        if path == "/suggest":
            q = record["query"].get("q", [""])[0]
            data = {"suggestions": [{"text": f"{q} kettle", "url": f"/search?q={q}+kettle"},
                                    {"text": "<b>bold</b>", "url": "javascript:alert(1)"}]}
            return self.reply(start_response, "200 OK", "application/json", json.dumps(data).encode())
        if path == "/_log":
            return self.reply(start_response, "204 No Content", "text/plain", b"")
        if path == "/_static/site.js":
            return self.reply(start_response, "200 OK", "text/javascript", (STATIC / "site.js").read_bytes())
        if path in ("/tracker_page.html", "/tracker_page2.html"):
            return self.reply(start_response, "200 OK", "text/html; charset=utf-8",
                              (FIXTURES / path.lstrip("/")).read_bytes())
        return self.reply(start_response, "200 OK", "text/html; charset=utf-8",
                          b"<!doctype html><title>elsewhere</title><p>elsewhere")

    def tracker(self, environ, start_response, body, record):
        """The real metrics.test app, with t.js's ENDPOINT pointed at this server."""
        environ["wsgi.input"] = io.BytesIO(body)
        answer = {}
        content = b"".join(self.metrics(environ, lambda status, headers, exc=None: answer.update(
            status=status, headers=headers)))
        if environ["PATH_INFO"] == "/t.js":
            content = content.replace(ENDPOINT, f"{self.base}/collect".encode())
        headers = [(k, v) for k, v in answer["headers"] if k.lower() != "content-length"]
        headers.append(("Content-Length", str(len(content))))
        record["set_cookie"] = [v for k, v in headers if k.lower() == "set-cookie"]
        start_response(answer["status"], headers)
        return [content]

    @staticmethod
    def reply(start_response, status, content_type, body):
        start_response(status, [("Content-Type", content_type), ("Content-Length", str(len(body))),
                                ("Cache-Control", "no-store")])
        return [body]

    def snapshot(self) -> list[dict]:
        with self.lock:
            return list(self.requests)

    def beacons(self, path="/collect") -> list[dict]:
        """Parsed JSON bodies POSTed to `path`, each with the request's Cookie header as `_cookie`."""
        return [{**json.loads(r["body"]), "_cookie": r["cookie"]}
                for r in self.snapshot() if r["method"] == "POST" and r["path"] == path]

    def wait(self, predicate, timeout=8.0, what="beacons"):
        """Poll until predicate(self) is truthy; return its value."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate(self)
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}: {[b.get('t') for b in self.beacons()]}")


@pytest.fixture
def site():
    site = FixtureSite()
    yield site
    site.close()


@pytest.fixture
def browser():
    if not Path("/usr/bin/chromium").exists() and not shutil.which("chromium"):
        pytest.fail("Debian's chromium is required for end-to-end tests: apt-get install -y chromium")
    from cdp import launch

    with launch() as browser:
        yield browser


def events(site, t, path="/collect"):
    return [b for b in site.beacons(path) if b.get("t") == t]


@pytest.mark.e2e
def test_tracker_and_site_script_in_chromium(site, browser):
    page = f"{site.base}/tracker_page.html"
    browser.goto(page)
    view = site.wait(lambda s: events(s, "view"), what="view")[0]
    assert view["page"] == page and view["title"] == "Kettles - tracker fixture"
    assert {"1", "filters", "theme-kosher-kitchen", "900"} <= set(view["seen"])
    cid, sid = view["cid"], view["sid"]
    assert len(cid) == 32 and len(sid) == 32 and cid != sid
    assert browser.eval("document.cookie").count("_mt_id=" + cid) == 1
    mid = next(r for r in site.snapshot() if r["path"] == "/t.js")["set_cookie"]
    assert mid and mid[0].startswith("mid=")
    mid = mid[0].split(";")[0]
    first_party_view = site.wait(lambda s: events(s, "view", "/_log"), what="site.js view")[0]
    assert first_party_view["page"] == page

    # Search box: site.js asks /suggest on every pause, t.js reports the keystrokes.
    contact_top = "document.querySelector('#contact').getBoundingClientRect().top"
    top = browser.eval(contact_top)
    browser.click("#q")
    browser.type("kosher ke", delay=0.03)
    browser.wait_for("[...document.querySelectorAll('ul.suggestions[role=listbox] li a')]"
                     ".map(a => a.textContent).join() === 'kosher ke kettle'")
    assert browser.eval(contact_top) == top  # the list overlays the page, nothing moves under the mouse
    suggestion = browser.eval("[...document.querySelectorAll('ul.suggestions a')]"
                              ".map(a => [a.textContent, a.getAttribute('href')])")
    assert suggestion == [["kosher ke kettle", f"{site.base}/search?q=kosher%20ke+kettle"]]
    asked = [r["query"]["q"][0] for r in site.snapshot() if r["path"] == "/suggest"]
    assert asked and asked[-1] == "kosher ke" and all("kosher ke".startswith(q) for q in asked)
    keys = site.wait(lambda s: events(s, "keys"), what="keys")[0]
    assert keys["name"] == "q" and [e["value"] for e in keys["entries"]][-1] == "kosher ke"
    assert len(keys["entries"]) == len("kosher ke")
    assert [e["ms"] for e in keys["entries"]] == sorted(e["ms"] for e in keys["entries"])
    focus = [f for f in events(site, "field") if f["name"] == "q" and f["action"] == "focus"]
    assert focus and focus[0]["label"] == "Search"

    # The contact form: values as typed, the password masked, the hidden field never.
    browser.click("#name")
    browser.type("Dana Cohen")
    browser.click("input[name=password]")
    browser.type("hunter2")
    browser.click("#note")
    browser.type("newly divorced")
    browser.click("h2")
    changes = site.wait(lambda s: (c := {f["name"]: f for f in events(s, "field") if f["action"] == "change"})
                        and {"name", "password", "note"} <= set(c) and c, what="field changes")
    assert changes["name"]["value"] == "Dana Cohen" and changes["name"]["label"] == "Your name"
    assert changes["name"]["form"] == f"{site.base}/contact" and changes["name"]["type"] == "text"
    assert changes["password"]["value"] == "***" and changes["password"]["label"] == "Password"
    assert changes["note"]["value"] == "newly divorced" and changes["note"]["type"] == "textarea"
    assert not any(b.get("name") == "csrf" for b in events(site, "field"))
    assert "hunter2" not in json.dumps(site.beacons()) + json.dumps(site.beacons("/_log"))

    # Scrolling to the end loads page 2 into the list; the Next link goes away.
    for _ in range(40):
        browser.eval("window.scrollBy(0, 400)")
        time.sleep(0.05)
        if browser.eval("document.querySelectorAll('[data-results] > li').length") == 40:
            break
    browser.wait_for("document.querySelectorAll('[data-results] > li').length === 40"
                     " && !document.querySelector('a[rel=next]')"
                     " && !document.querySelector('[data-results]').hasAttribute('data-next')")
    assert [r["path"] for r in site.snapshot()].count("/tracker_page2.html") == 1
    browser.eval("document.querySelector('[data-product=\"38\"]').scrollIntoView()")
    scroll = site.wait(lambda s: [b for b in events(s, "scroll") if "38" in b["seen"]], what="scroll")
    assert scroll[0]["depth"] > 50

    # Start another search, then leave before the 700 ms pause: pagehide sends the rest.
    browser.eval("window.scrollTo(0, 0)")
    time.sleep(0.3)
    browser.click("#q")
    browser.eval("document.querySelector('#q').select()")
    browser.type("sabbath")
    browser.goto("about:blank")
    keys = site.wait(lambda s: [k for k in events(s, "keys") if k["entries"][-1]["value"] == "sabbath"],
                     what="keys on pagehide")
    assert keys[0]["sid"] == sid

    # Dwell: every product and section that was on screen, with milliseconds.
    def dwell(s):
        total = {}
        for beacon in events(s, "impression"):
            assert beacon["page"] == page and beacon["cid"] == cid
            for item in beacon["items"]:
                key = (item["kind"], item["id"])
                total[key] = total.get(key, 0) + item["ms"]
                assert item["ms"] > 0 and item["sponsored"] == (item["id"] in ("3", "900"))
        return total if ("product", "38") in total else None

    total = site.wait(dwell, what="impressions of page 2 tiles")
    assert {("product", "1"), ("product", "3"), ("section", "results"), ("section", "filters")} <= set(total)
    assert total[("product", "1")] > 200
    sponsored = site.wait(lambda s: events(s, "impression", "/_log"), what="_log impression")
    assert {p for b in sponsored for p in b["products"]} == {"3", "900"}

    # Every tracker beacon is tied to the visitor: the first-party cid and the third-party mid.
    for beacon in site.beacons():
        assert beacon["cid"] == cid
        assert mid in beacon["_cookie"]
        assert f"_mt_id={cid}" in beacon["_cookie"]  # same host here, so the site cookie rides along

    # A second page load: same visitor, new page session, mid not reissued; submit without secrets.
    before = len(site.snapshot())
    browser.goto(page)
    site.wait(lambda s: len(events(s, "view")) == 2, what="second view")
    again = [r for r in site.snapshot()[before:] if r["path"] in ("/t.js", "/collect")]
    assert again and not [r for r in again if r["set_cookie"]]
    second = events(site, "view")[1]
    assert second["cid"] == cid and second["sid"] != sid
    browser.click("#name")
    browser.type("Dana")
    browser.click("input[name=password]")
    browser.type("hunter2")
    browser.click("#contact button")
    submit = site.wait(lambda s: events(s, "submit"), what="submit")[0]
    assert submit["action"] == f"{site.base}/contact" and submit["method"] == "post"
    assert submit["fields"] == [["name", "Dana"], ["email", ""], ["note", ""]]
    send = site.wait(lambda s: [c for c in events(s, "click") if c["label"] == "Send"], what="click")
    assert send[0]["tag"] == "button" and send[0]["href"] is None
    site.wait(lambda s: [c for c in events(s, "click", "/_log") if c["label"] == "Send"], what="_log click")
