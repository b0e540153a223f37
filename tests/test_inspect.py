"""`spillage inspect`: a session's timeline in the terminal and as a page, on sessions written with
the real capture writer and audited by the real auditor; captured payloads never run."""

import json
import re

import pytest
from audit_helpers import SHOP, Traffic, search_url

from spillage.audit.session_audit import audit_session, write_report
from spillage.proxy.layout import REPORT_NAME
from spillage.reports.inspect_html import timeline_html
from spillage.reports.inspect_text import timeline_text
from spillage.reports.timeline import load_timeline
from spillage.runner.cli import main

SCRIPT = "<script>document.title='pwned'</script>"
IMG = "<img src=x onerror=\"window.__pwned=1\">"
QUERY = f"kettle pregnant {SCRIPT} {IMG}"
PAGE = b"<p>results</p><script>window.__pwned=2</script><img src=x onerror=\"window.__pwned=3\">"
ESCAPE = "kettle laid off \x1b[2J\x1b[31m"


@pytest.fixture
def session(tmp_path, catalog_file):
    """Home, a search whose query and result page carry payloads, a search with terminal escapes."""
    t = Traffic(tmp_path / "session", catalog=catalog_file)
    t.load(f"{SHOP}/")
    t.click("Search", tag="button")
    t.exchange("GET", search_url(QUERY), response=PAGE)
    t.page = search_url(QUERY)
    t.exchange("GET", "https://metrics.test/t.js", response=b"/* beacon */")
    t.beacon("view", page=t.page, ref="", title="shop.test", seen=[])
    t.load(search_url(ESCAPE))
    folder = t.close()
    write_report(folder, audit_session(folder))
    return folder


def test_terminal_timeline_shows_status_first_and_matches_highlighted(session):
    text = timeline_text(load_timeline(session))
    lines = text.splitlines()
    assert lines[0].startswith("chain OK: 26 records, head ")  # OK said once
    assert f"({REPORT_NAME})" in lines[1]
    assert f"text: kettle »pregnant« {SCRIPT} {IMG}" in text
    assert "C_E pregnant: matched »pregnant«  observers shop.test, metrics.test  seq " in text
    assert "C_E laid-off: matched »laid off«" in text
    assert "\x1b" not in text and "»laid off« \\x1b[2J\\x1b[31m" in text  # the capture cannot drive the terminal
    search = next(line for line in lines if "click/search" in line)
    assert search.strip().startswith("+") and "content" in search and "shop.test, metrics.test" in search


def test_colour_highlights_with_ansi(session):
    text = timeline_text(load_timeline(session), colour=True)
    assert "\x1b[1;32mchain OK\x1b[0m" in text and "\x1b[1;31mpregnant\x1b[0m" in text


def test_a_tampered_log_says_so_first_and_exits_1(session, capsys):
    log = session / "capture.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    record = json.loads(lines[5])
    record["url"] = record.get("url", "") + "?x"
    lines[5] = json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n"
    log.write_text("".join(lines))
    assert main(["inspect", str(session)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("chain FAILED: ") and "FAILED: FAIL" not in out[0] and "modified" in out[0]
    assert "audit.json is stale" in out[1]


def test_without_audit_json_the_session_is_audited_now(session, capsys):
    (session / REPORT_NAME).unlink()
    assert main(["inspect", str(session)]) == 0
    out = capsys.readouterr().out
    assert "(no audit.json, audited now)" in out and "»pregnant«" in out


def test_not_a_session_is_one_line_exit_2(tmp_path, capsys):
    assert main(["inspect", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no capture.jsonl here" in err[0]


def test_html_escapes_every_captured_string(session):
    page = timeline_html(load_timeline(session)).replace("<wbr>", "")  # line-break opportunities in URLs
    assert page.count("<script") == 1  # the page's own
    assert "<img" not in page and "onerror=\"window" not in page
    assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in page
    assert "&lt;script&gt;window.__pwned=2&lt;/script&gt;" in page  # the response body, in the records store
    assert all(url.startswith("data:application/json;base64,")  # the proofs made here, nothing else
               for url in re.findall(r"<[^>]*\s(?:src|href)=['\"]?([^'\" >]*)", page))


def test_an_unsigned_log_has_no_proof_to_offer_and_says_why(session):
    page = timeline_html(load_timeline(session))
    assert "a class='download'" not in page
    assert re.search(r"No inclusion proof of seq \d+: \S+capture.jsonl: the log is unsigned, so nothing can be "
                     r"proved from it\.", page)


@pytest.mark.e2e
def test_payloads_do_not_run_in_chromium_and_records_open_on_click(session, tmp_path, capsys):
    from cdp import launch

    page = tmp_path / "inspect.html"
    assert main(["inspect", str(session), "--html", str(page)]) == 0
    with launch() as browser:
        browser.goto(page.as_uri())
        assert browser.eval("document.title") == f"inspect {session.name}"
        assert browser.eval("typeof window.__pwned") == "undefined"
        assert f"kettle pregnant {SCRIPT} {IMG}" in browser.eval("document.getElementById('timeline').innerText")
        browser.click(".event[data-category=C_E] button")
        proof = browser.eval("document.querySelector('.event[data-category=C_E] .proof').innerText")
        assert "GET https://shop.test/s?k=kettle+pregnant+%3Cscript%3E" in proof.replace("\n", "")
        browser.click("li.leaky button.records")
        records = browser.eval("document.querySelector('li.leaky div.records').innerText")
        assert "<script>window.__pwned=2</script>" in records  # the response body, as text
        assert browser.eval("typeof window.__pwned") == "undefined"
        assert browser.eval("document.title") == f"inspect {session.name}"
        events = "[...document.querySelectorAll('.event')].filter(b => !b.hidden).length"
        assert browser.eval(events) == 2
        browser.click("input[value=C_E]")
        assert browser.eval(events) == 0
        assert browser.eval("document.getElementById('count').textContent") == "0"  # both actions leak C_E only
        browser.click("input[value=C_E]")
        assert browser.eval("document.getElementById('count').textContent") == "2"
        browser.click("input[value='shop.test']")
        browser.click("input[value='metrics.test']")
        assert browser.eval("document.getElementById('count').textContent") == "0"
