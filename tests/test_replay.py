"""`spillage replay`: the agent's requests re-sent in order through a fresh proxy and origins
(real mitmproxy, real origins), into a new session that audits and diffs against the original."""

import json
import shutil
from pathlib import Path

import pytest

from audit_helpers import KETTLE, Traffic
from run_helpers import spillage
from spillage.proxy.capturelog import iter_records
from spillage.proxy.capturelog import read_body
from spillage.proxy.verify import verify
from spillage.runner.cli import main
from spillage.runner.replay import replay_session

pytestmark = pytest.mark.e2e

OLD_VISITOR = "qgTbSV1mRCslOqzAv-l8JgWs"


def records(session: Path) -> list[dict]:
    return [line.record for line in iter_records(session)]


def recorded_session(folder: Path, catalog: Path, product: int) -> Path:
    """Browser background, a product page, a beacon, an add to cart and the cart page, as the proxy
    records them; the cart requests carry the visitor cookie of the original run and a script's cookie."""
    t = Traffic(folder, KETTLE, catalog)
    t.add("egress_blocked", flow="00000000-0000-4000-8000-000000000900", method="CONNECT",
          url="www.google.com:443", host="www.google.com", port=443, background=True, headers=[], body=None,
          reason="not a .test host")

    def request(method: str, url: str, cookie: str = "", body: bytes = b"", content_type: str = "") -> dict:
        headers = [["user-agent", "HeadlessChrome"]] + ([["content-type", content_type]] if content_type else []) \
            + ([["cookie", cookie]] if cookie else [])
        return t.add("request", flow=f"00000000-0000-4000-8000-{len(t.records):012d}", method=method, url=url,
                     http_version="HTTP/2.0", headers=headers, body=t.writer.body(body or None))

    request("GET", f"https://shop.test/p/{product}")
    beacon = request("POST", "https://metrics.test/collect", body=b'{"t":"view","page":"x"}',
                     content_type="text/plain")
    t.add("beacon", flow=beacon["flow"], request=beacon["seq"], url=beacon["url"], event="view",
          data={"t": "view", "page": "x"})
    cookies = f"visitor={OLD_VISITOR}; _mt_id=from-a-script"
    form = request("POST", "https://shop.test/cart/add", cookies, f"product_id={product}&qty=1".encode(),
                   "application/x-www-form-urlencoded")
    t.add("form", flow=form["flow"], request=form["seq"], url=form["url"], method="POST",
          enctype="application/x-www-form-urlencoded", fields=[["product_id", str(product)], ["qty", "1"]])
    request("GET", "https://shop.test/cart", cookies)
    return t.close()


def test_replay_resends_agent_requests_in_order_with_the_replays_cookies(tmp_path, catalog_file, shop, capsys):
    product = next(iter(shop.products))
    original = recorded_session(tmp_path / "original", catalog_file, product)
    result = replay_session(original, tmp_path / "runs", tmp_path / "ca", log=lambda m: None, bar=True)
    replay = result.session_dir
    assert result.capture_ok and verify(replay).ok
    assert [s.status for s in result.sent] == [200, 204, 303, 200]
    lines = capsys.readouterr().err.splitlines()   # no terminal: one line per request sent, with the ETA
    assert [line.split("]")[0] for line in lines] == [f"spillage: replay [{n}/4 requests" for n in range(1, 5)]
    assert lines[-1].startswith("spillage: replay [4/4 requests] GET https://shop.test/cart → 200; ")

    meta = json.loads((replay / "meta.json").read_text())
    assert meta["replay_of"]["session"] == original.name and meta["agent"]["label"] == f"replay of {original.name}"
    assert meta["replay"]["requests"] == 4 and meta["capture"]["head"] == verify(replay).head
    assert (replay / "scenario.yaml").read_bytes() == (original / "scenario.yaml").read_bytes()
    stored = tmp_path / "ca" / "catalogs" / f"{meta['catalog']['sha256']}.sqlite"  # the home's store
    assert stored.read_bytes() == catalog_file.read_bytes() and not (replay / "catalog.sqlite").exists()

    sent = [r for r in records(replay) if r["kind"] in ("request", "egress_blocked")]
    assert [(r["method"], r["url"]) for r in sent] == [
        ("GET", f"https://shop.test/p/{product}"), ("POST", "https://metrics.test/collect"),
        ("POST", "https://shop.test/cart/add"), ("GET", "https://shop.test/cart")]  # no background
    assert [r["kind"] for r in records(replay)].count("beacon") == 1  # derived again once, not sent twice
    forms = [r["fields"] for r in records(replay) if r["kind"] == "form"]
    assert forms == [[["product_id", str(product)], ["qty", "1"]]]

    replayed = {r["seq"]: r for r in records(replay)}
    page_response = next(r for r in replayed.values() if r["kind"] == "response" and r["request"] == sent[0]["seq"])
    new_visitor = next(v for k, v in page_response["headers"] if k.lower() == "set-cookie").split(";")[0]
    assert new_visitor.startswith("visitor=") and new_visitor != f"visitor={OLD_VISITOR}"
    cart_cookie = next(v for k, v in sent[3]["headers"] if k.lower() == "cookie")
    assert cart_cookie == f"{new_visitor}; _mt_id=from-a-script"
    cart_page = next(r for r in replayed.values() if r["kind"] == "response" and r["request"] == sent[3]["seq"])
    assert shop.products[product].title.split(" – ")[0] in read_body(replay, cart_page["body"]).decode()


def test_a_request_mitmproxy_could_not_read_whole_is_sent_as_written_and_refused_again(tmp_path, catalog_file, shop):
    """Transfer-Encoding with Content-Length to our own shop, and an ftp:// URL: refused because mitmproxy
    could not read them whole. Sent again well-formed, the first would reach the shop; sent as written,
    the proxy refuses both again, with the same reason, and the shop gets neither."""
    product = next(iter(shop.products))
    t = Traffic(tmp_path / "original", KETTLE, catalog_file)
    chunked = b"10\r\nquestion=pregnant\r\n0\r\n\r\n"
    shapes = [("POST", f"http://shop.test/p/{product}/ask", "shop.test", 80,
               [["Host", "shop.test"], ["Transfer-Encoding", "chunked"], ["Content-Length", "5"]], chunked,
               "request refused; mitmproxy failed it before it was whole (both transfer-encoding and content-length)"),
              ("GET", "ftp://127.0.0.2:21/x", "127.0.0.2", 21, [["Host", "127.0.0.2:21"]], b"",
               "request refused: not a .test host; mitmproxy failed it before it was whole (Invalid request scheme)")]
    for n, (method, url, host, port, headers, body, reason) in enumerate(shapes):
        t.add("egress_blocked", flow=f"00000000-0000-4000-8000-00000000090{n}", method=method, url=url, host=host,
              port=port, background=False, headers=headers, body=t.writer.body(body or None), reason=reason)
    result = replay_session(t.close(), tmp_path / "runs", tmp_path / "ca", log=lambda m: None)
    assert result.capture_ok and [s.status for s in result.sent] == [None, 400]
    again = [r for r in records(result.session_dir) if r["kind"] in ("request", "egress_blocked")]
    assert [(r["kind"], r["method"], r["url"]) for r in again] == [
        ("egress_blocked", "POST", f"http://shop.test/p/{product}/ask"), ("egress_blocked", "GET", "ftp://127.0.0.2:21/x")]
    assert all("mitmproxy failed it before it was whole" in r["reason"] for r in again)
    assert read_body(result.session_dir, again[0]["body"]) == chunked


def test_replay_refuses_a_log_that_fails_verification(tmp_path, catalog_file, shop, capsys):
    original = recorded_session(tmp_path / "original", catalog_file, next(iter(shop.products)))
    log = original / "capture.jsonl"
    log.write_text(log.read_text().replace("/cart\"", "/kart\""))
    assert main(["--home", str(tmp_path / "home"), "replay", str(original), "--runs-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "fails verification" in err[0] and "nothing was replayed" in err[0]
    assert not (tmp_path / "runs").exists()


def test_a_scripted_run_replays_with_only_volatile_differences(tmp_path):
    if not shutil.which("chromium"):
        pytest.fail("Debian's chromium is required for end-to-end tests: apt-get install -y chromium")
    run = spillage(tmp_path, "run", "--scenario", "shop-kettle-chat", "--model", "scripted:minimal")
    assert run.returncode == 0, run.stderr[-3000:]
    original = Path(run.stdout.strip().splitlines()[-1])
    replayed = spillage(tmp_path, "replay", str(original))
    assert replayed.returncode == 0, replayed.stderr[-3000:]
    replay = Path(replayed.stdout.strip())
    assert replay.parent == original.parent and replay != original

    diff = spillage(tmp_path, "diff", "--format", "json", str(original), str(replay))
    result = json.loads(diff.stdout)
    assert diff.returncode == 0, result["differences"][:5]
    assert result["equal"] and result["differences"] == []
    assert result["requests"]["paired"] == result["requests"]["a"] == result["requests"]["b"] > 20
    assert result["actions"]["a"] == result["actions"]["b"] > 3
    assert result["volatile"]["date header"] == result["requests"]["paired"]  # named, not counted as differences
    assert result["volatile"]["set-cookie header"] > 0

    text = spillage(tmp_path, "diff", str(original), str(replay))
    assert text.returncode == 0 and text.stdout.startswith("equal: 0 differences")
