"""The forensic page and report.html in real Chromium (Playwright, Debian's chromium) at 1300 and
800 px: nothing wider than the window, a match never split over two lines, and the forensic page's
event click landing on the record that proves it, whose inclusion proof downloads and verifies."""

import subprocess
import sys

import pytest
from audit_helpers import SHOP, Traffic, search_url
from capture_helpers import NOW
from pages import HEIGHT, WIDTHS, VISIBLE_MATCHES, browser, layout_faults
from report_helpers import write_audited_session

from spillage.audit.session_audit import audit_session, write_report
from spillage.proxy.signing import SessionKey
from spillage.proxy.signing import load_or_create_key
from spillage.runner.cli import main

pytestmark = pytest.mark.e2e

LONG = "electric kettle gooseneck variable temperature cordless stainless steel " * 8 + "pregnant laid off"
CLICK_LEAK = "document.querySelector('.event[data-category=C_E] button').click()"  # no scrolling to it first


@pytest.fixture(scope="module")
def chromium():
    with browser() as chromium:
        yield chromium


@pytest.fixture
def forensic(tmp_path, catalog_file):
    """A signed session: a dozen searches that leak nothing, then one whose long query (and the
    tracker's copy of it) leaks; its page."""
    home = tmp_path / "home"
    folder = tmp_path / "session"
    t = Traffic(folder, catalog=catalog_file, signing=SessionKey.issue(load_or_create_key(home), folder.name, NOW))
    t.load(f"{SHOP}/")
    for n in range(12):
        t.load(search_url(f"kettle {n} litre"))
    t.beacon("field", page=t.page, name="k", value=LONG)
    t.load(search_url(LONG))
    write_report(folder, audit_session(t.close()))
    page = tmp_path / "inspect.html"
    assert main(["inspect", str(folder), "--html", str(page)]) == 0
    return page


@pytest.fixture
def report_page(tmp_path):
    """report.html of four groups, every one succeeding, with CIs in every cell."""
    runs = tmp_path / "runs"
    for n, (framework, model) in enumerate([(f, m) for f in ("browser-use", "autogen")
                                            for m in ("scripted:minimal", "scripted:oversharer")] * 2):
        write_audited_session(runs, f"s{n}", framework=framework, model=model, actions=14 + n % 3,
                              occurrences={"C_E": 3 + n % 2, "B_E": 2, "B_I": 1} if "over" in model else {},
                              recovered=[{"first-party", "third-party"}] * (2 if "over" in model else 0))
    assert main(["report", str(runs), "--out", str(tmp_path / "report"), "--by", "framework,model", "--quiet"]) == 0
    return tmp_path / "report" / "report.html"


@pytest.mark.parametrize("width", WIDTHS)
def test_the_forensic_page_fits_and_a_click_lands_on_the_proof(chromium, forensic, tmp_path, width):
    page_file = forensic
    page = chromium.new_page(viewport={"width": width, "height": HEIGHT})
    page.goto(page_file.as_uri())
    assert page.evaluate(VISIBLE_MATCHES) >= 2 and layout_faults(page) == []
    assert page.evaluate("getComputedStyle(document.getElementById('timeline')).listStyleType") == "none"  # #n alone
    assert page.locator("header p").first.inner_text().startswith("chain OK: ")
    assert page.locator("header p").first.inner_text().count("OK") == 1

    page.evaluate(CLICK_LEAK)
    proof = page.locator(".event[data-category=C_E] .proof").first
    record = proof.locator(".record.proving")
    assert "current" in record.get_attribute("class")
    matched = record.locator("mark.match").first
    box = matched.bounding_box()
    assert 0 <= box["y"] and box["y"] + box["height"] <= HEIGHT  # scrolled to the matched bytes
    assert matched.evaluate("m => m.getClientRects().length") == 1 and matched.inner_text().lower() == "pregnant"
    assert "in query:k, decoded (percent):" in proof.inner_text()
    assert layout_faults(page) == []

    with page.expect_download() as download:
        proof.locator("a.download").click()
    saved = tmp_path / download.value.suggested_filename
    download.value.save_as(saved)
    checked = subprocess.run([sys.executable, "-m", "spillage.runner.cli", "verify-proof", str(saved)],
                             capture_output=True, text=True)
    assert checked.returncode == 0 and checked.stdout.startswith(f"OK {saved}: record "), checked.stdout + checked.stderr
    page.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_report_html_fits(chromium, report_page, width):
    page = chromium.new_page(viewport={"width": width, "height": HEIGHT})
    page.goto(report_page.as_uri())
    assert layout_faults(page) == []
    align = "cells => [...new Set(cells.map(c => getComputedStyle(c).textAlign))]"
    assert page.eval_on_selector_all("td:first-child, td:nth-child(2), th:first-child", align) == ["left"]
    assert page.eval_on_selector_all("td:nth-child(3), th:nth-child(3)", align) == ["right"]  # sessions, numbers
    plot = page.locator("figure svg").nth(2).bounding_box()
    assert plot["height"] < 250  # every group succeeds: a band, not a square left empty
    page.close()
