"""Real browsers are not agents: the same browsing of shop.test, recorded through our proxy with Firefox
ESR, Debian's Chromium (with and without its background switches), Selenium with chromedriver,
browser-use and curl (tests/fixtures/browsers/README.md), audits to the same actions and events in each;
what each browser sent on its own is reported as the browser's; browser-use's own HAR of it imports
saying what the file lacks."""

import shutil
from pathlib import Path

import pytest
from capture_helpers import live_of
from capture_helpers import unpack_fixture

from spillage.audit.session_audit import audit_session
from spillage.proxy.formats import har
from spillage.proxy.capturelog import iter_records
from spillage.proxy.layout import CATALOG_COPY
from spillage.proxy.verify import verify
from spillage.runner.cli import main

FIXTURES = Path(__file__).parent / "fixtures" / "browsers"
BROWSERS = ("firefox-esr", "chromium-default", "chromium-quiet", "selenium-chromium", "browser-use-https",
            "browser-use-http")
# The seven steps of the README: search, the facet that names the pregnancy, the first result, into the cart.
STEPS = [("search", "gooseneck kettle"), ("filter", "Pregnancy safe (BPA-free)"), ("view_product", 10250),
         ("add_to_cart", 10250)]


def unpack(name: str, tmp: Path, catalog: Path) -> Path:
    return unpack_fixture(FIXTURES / name, tmp, catalog)


def steps(report: dict) -> list[tuple]:
    return [(a["what"], a["detail"]["product"] if "product" in (a.get("detail") or {}) else a["text"])
            for a in report["actions"]]


def events(report: dict) -> list[tuple]:
    return [(e["category"], e["attribute"], report["actions"][e["action"] - 1]["what"]) for e in report["events"]]


@pytest.fixture(scope="module")
def audits(tmp_path_factory, catalog_file) -> dict[str, dict]:
    tmp = tmp_path_factory.mktemp("browsers")
    out = {}
    for name in (*BROWSERS, "curl-http2"):
        session = live_of(unpack(name, tmp, catalog_file))
        assert verify(session).ok, name
        out[name] = audit_session(session)
    return out


@pytest.mark.parametrize("name", BROWSERS)
def test_every_browser_audits_to_the_same_steps_and_leaks(audits, name):
    assert steps(audits[name]) == STEPS
    assert events(audits[name]) == [("B_E", "pregnant", "filter"), ("B_E", "pregnant", "view_product"),
                                    ("B_E", "pregnant", "add_to_cart")]


def test_curl_doing_three_of_the_steps_audits_to_those(audits):
    assert steps(audits["curl-http2"]) == [STEPS[0], STEPS[3]]   # no facet clicked, no product page asked for
    assert audits["curl-http2"]["browser_background"]["requests"] == 0


@pytest.mark.parametrize("name, reasons", [
    ("firefox-esr", {"remote-settings", "captive-portal", "telemetry", "push", "region", "first-run", "update"}),
    ("chromium-default", {"update", "sign-in", "time"}),
    ("selenium-chromium", {"update", "sign-in", "time", "search-engine"}),
    ("browser-use-https", {"agent-harness", "search-engine", "sign-in", "time", "update"}),
])
def test_what_a_browser_sends_on_its_own_is_the_browsers(audits, name, reasons):
    report = audits[name]
    background = report["browser_background"]
    assert reasons <= set(background["by_reason"]) and background["requests"] >= len(reasons)
    assert not any(o.startswith("refused:") for a in report["actions"] for o in a["observers"])


def test_firefox_background_is_recognised_though_the_proxy_that_recorded_it_did_not_know_its_hosts(
        tmp_path, catalog_file, audits):
    session = live_of(unpack("firefox-esr", tmp_path, catalog_file))
    flagged = [r for r in (line.record for line in iter_records(session)) if r["kind"] == "egress_blocked"]
    assert sum(not r["background"] for r in flagged) >= 40   # recorded before proxy/hosts.py named Mozilla's hosts
    assert audits["firefox-esr"]["browser_background"]["requests"] == len(flagged)


@pytest.mark.parametrize("name, plain_http", [("browser-use-https", False), ("browser-use-http", True)])
def test_browser_uses_har_names_its_redirects_and_its_https_only_gap(tmp_path, catalog_file, name, plain_http):
    folder = unpack(name, tmp_path, catalog_file)
    out = tmp_path / "imported"
    assert main(["import", str(folder / "browser-use.har"), "--scenario", "shop-kettle-chat", "--out", str(out),
                 "--no-catalog"]) == 0
    shutil.copy(catalog_file, out / CATALOG_COPY)
    report = audit_session(out)
    lacks = report["provenance"]["lacks"]
    assert {har.LACK_REDIRECTS, har.LACK_PLAIN_HTTP, har.LACK_UNLOAD_BEACONS, har.LACK_OWN_REQUESTS} <= set(lacks)
    assert har.LACK_RESPONSE_BODIES not in lacks   # no omit mode: the bodies it has are all there
    if plain_http:   # the pages went over http, so the HAR holds none of them: what the tracker was told is left
        assert steps(report)[:3] == STEPS[:3]
        assert {o for a in report["actions"] for o in a["observers"]} == {"metrics.test"}
    else:            # the cart's POST was redirected: the HAR kept only the GET it led to
        assert ("add_to_cart", 10250) not in steps(report) and steps(report)[:3] == STEPS[:3]
