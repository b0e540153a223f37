"""`spillage import`: HAR, mitmproxy flow and pcap files into session folders (docs/CAPTURE_FILES.md).

pcaps are built here packet by packet with scapy's own layers, independently of our pcap writer.
"""

import hashlib
import json
import zipfile
from itertools import zip_longest
from pathlib import Path

import pytest
from mitmproxy import http
from mitmproxy import io as mitmio
from mitmproxy.test import tflow
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.utils import PcapNgWriter, wrpcap

from spillage.audit.session_audit import audit_session
from spillage.proxy.capturelog import iter_records
from spillage.proxy.capturelog import read_body
from spillage.proxy.verify import verify
from spillage.runner.cli import main

FIXTURES = Path(__file__).parent / "fixtures" / "captures"
SCENARIO = "shop-kettle-chat"


def records(session: Path) -> list[dict]:
    return [line.record for line in iter_records(session)]


def of_kind(session: Path, kind: str) -> list[dict]:
    return [r for r in records(session) if r["kind"] == kind]


def run_import(source: Path, out: Path, *extra: str) -> int:
    return main(["import", str(source), "--scenario", SCENARIO, "--out", str(out), "--no-catalog", *extra])


# --- HAR -------------------------------------------------------------------------------------


def test_chrome_har_becomes_a_verified_session_with_provenance(tmp_path, capsys):
    source = FIXTURES / "chrome-devtools.har"
    assert run_import(source, tmp_path / "s") == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "s")
    log = records(tmp_path / "s")
    assert [r["kind"] for r in log[:3]] == ["signer", "session_start", "import"]
    assert [r["kind"] for r in log[-2:]] == ["session_end", "checkpoint"]  # signed by the importer
    provenance = log[2]
    assert provenance["format"] == "har" and provenance["file"] == "chrome-devtools.har"
    assert provenance["sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    assert provenance["size"] == source.stat().st_size
    # the memory-cache hit never crossed the wire; the failed Google search did (no answer)
    assert provenance["counts"]["request"] == 6 and provenance["counts"]["response"] == 5
    result = verify(tmp_path / "s")
    assert result.ok and "vouch for the import, not for the original capture" in result.summary()
    meta = json.loads((tmp_path / "s" / "meta.json").read_text())
    assert meta["status"] == "imported" and meta["capture"]["head"] == result.head
    assert (tmp_path / "s" / "scenario.yaml").is_file()


def test_har_bodies_headers_and_derived_records(tmp_path):
    run_import(FIXTURES / "chrome-devtools.har", tmp_path / "s")
    session = tmp_path / "s"
    search = of_kind(session, "request")[0]
    assert search["url"] == "http://shop.test/s?k=gooseneck+kettle+pregnant"
    assert search["headers"][2:] == [["Cookie", "sid=1"], ["Cookie", "consent=yes"]]  # order, duplicates
    response = of_kind(session, "response")[0]
    assert read_body(session, response["body"]).decode() == "<h1>Kettles for you é</h1>"
    image = of_kind(session, "response")[3]
    assert read_body(session, image["body"]) == b"\x89PNG\r\n\x1a\n"           # base64 content
    beacon = of_kind(session, "beacon")[0]
    assert beacon["event"] == "click" and beacon["data"]["label"] == "Pregnancy safe (BPA-free)"
    form = of_kind(session, "form")[0]                                         # from postData.params
    assert form["fields"] == [["product", "10243"], ["note", "for my baby"]]
    errors = [r["message"] for r in of_kind(session, "error")]
    assert "response body is not in the imported file: unknown, not empty" in errors  # not b""
    assert "net::ERR_TUNNEL_CONNECTION_FAILED" in errors


def test_playwright_har_keeps_gzip_bytes_consistent_with_their_header(tmp_path):
    run_import(FIXTURES / "playwright.har", tmp_path / "s")
    session = tmp_path / "s"
    page = of_kind(session, "response")[0]
    raw = read_body(session, page["body"])
    import gzip
    assert gzip.decompress(raw) == b"<p>12 film cameras</p>"   # HAR text is decoded; the wire was gzip
    assert of_kind(session, "form")[0]["fields"][1] == ["question", "Does it work? I am recently divorced"]
    assert read_body(session, of_kind(session, "response")[1]["body"]) == b"\x00\x01\x02\xff"


def test_browser_use_har_sidecar_bodies_pseudo_headers_and_omitted_bodies(tmp_path):
    run_import(FIXTURES / "browser-use.har", tmp_path / "s")
    session = tmp_path / "s"
    page, beacon, script = of_kind(session, "request")
    assert page["http_version"] == "HTTP/2.0" and page["url"] == "https://shop.test/"
    assert [h[0] for h in page["headers"]] == ["user-agent"]                    # no :authority etc.
    responses = of_kind(session, "response")
    assert read_body(session, responses[0]["body"]) == b"<html>attached body</html>"  # _file sidecar
    unknown = [(r["request"], r["message"]) for r in of_kind(session, "error")]
    assert unknown == [(beacon["seq"], "request body is not in the imported file: unknown, not empty"),
                       (script["seq"], "response body is not in the imported file: unknown, not empty")]
    assert beacon["body"] is None and responses[2]["body"] is None


def test_import_audits_into_actions_and_leaks(tmp_path, catalog_file):
    assert main(["import", str(FIXTURES / "chrome-devtools.har"), "--scenario", SCENARIO,
                 "--out", str(tmp_path / "s")]) == 0
    report = audit_session(tmp_path / "s")
    assert report["provenance"]["source"] == "import" and report["provenance"]["format"] == "har"
    assert report["provenance"]["chain_vouches_for"] == "the import, not the original capture"
    searches = [a for a in report["actions"] if a["what"] == "search"]
    assert searches and "pregnant" in searches[0]["text"]
    assert any(e["attribute"] == "pregnant" for e in report["events"])


# --- mitmproxy flows -------------------------------------------------------------------------


def flow_file(path: Path) -> list[http.HTTPFlow]:
    form = tflow.tflow(req=http.Request.make(
        "POST", "http://shop.test/cart/add", b"product=7&note=laid+off",
        {"Content-Type": "application/x-www-form-urlencoded"}), resp=True)
    refused = tflow.tflow(req=http.Request.make("GET", "http://www.google.com/search?q=kettle"))
    refused.response = http.Response.make(
        403, b"spillage: egress refused; only *.test hosts are reachable through this proxy\n")
    streamed = tflow.tflow(resp=True)
    streamed.response.raw_content = None          # mitmproxy streamed it: not kept
    failed = tflow.tflow(err=True)
    flows = [form, refused, streamed, failed]
    with open(path, "wb") as f:
        writer = mitmio.FlowWriter(f)
        for fl in flows:
            writer.add(fl)
        writer.add(tflow.ttcpflow())
    return flows


def test_mitm_flows_refusals_streamed_bodies_errors_and_other_flows(tmp_path):
    flows = flow_file(tmp_path / "flows.mitm")
    assert run_import(tmp_path / "flows.mitm", tmp_path / "s") == 0
    session = tmp_path / "s"
    assert of_kind(session, "import")[0]["format"] == "mitm"
    began = sorted((flows[0], flows[2], flows[3]), key=lambda f: f.request.timestamp_start)  # stable
    assert [r["flow"] for r in of_kind(session, "request")] == [f.id for f in began]   # in request order
    assert of_kind(session, "form")[0]["fields"] == [["product", "7"], ["note", "laid off"]]
    blocked = of_kind(session, "egress_blocked")
    # a search on an engine is the agent's, not the browser's background traffic
    assert [(b["url"], b["background"]) for b in blocked] == [("http://www.google.com/search?q=kettle", False)]
    messages = [r["message"] for r in of_kind(session, "error")]
    assert "response body is not in the imported file: unknown, not empty" in messages
    assert flows[3].error.msg in messages
    assert any(m.startswith("tcp flow in the mitmproxy file: not HTTP") for m in messages)


# --- pcap ------------------------------------------------------------------------------------

CLIENT, SERVER = ("10.0.0.2", 50000), ("10.0.0.1", 80)


def segments(src, dst, seq, ack, data: bytes, size: int = 100) -> list:
    return [Ether() / IP(src=src[0], dst=dst[0]) / TCP(sport=src[1], dport=dst[1], flags="PA",
                                                       seq=seq + i, ack=ack) / data[i:i + size]
            for i in range(0, len(data), size)]


def connection(requests: list[bytes], responses: list[bytes], client=CLIENT, server=SERVER,
               shuffle=False) -> list:
    """A keep-alive connection: handshake, each request then its response, FINs."""
    c, s = 1000, 9000
    pkts = [Ether() / IP(src=client[0], dst=server[0]) / TCP(sport=client[1], dport=server[1], flags="S", seq=c - 1),
            Ether() / IP(src=server[0], dst=client[0]) / TCP(sport=server[1], dport=client[1], flags="SA", seq=s - 1,
                                                             ack=c)]
    for req, res in zip_longest(requests, responses, fillvalue=b""):
        sent = segments(client, server, c, s, req)
        if shuffle and len(sent) > 2:
            sent = [sent[1], sent[0], sent[0], *sent[2:], sent[-1]]   # out of order, a retransmission
        pkts += sent
        c += len(req)
        pkts += segments(server, client, s, c, res)
        s += len(res)
    pkts += [Ether() / IP(src=client[0], dst=server[0]) / TCP(sport=client[1], dport=server[1], flags="FA", seq=c, ack=s),
             Ether() / IP(src=server[0], dst=client[0]) / TCP(sport=server[1], dport=client[1], flags="FA", seq=s, ack=c + 1)]
    return pkts


SEARCH = b"GET /s?k=kettle+for+a+pregnant+mum HTTP/1.1\r\nHost: shop.test\r\nCookie: a=1\r\n\r\n"
FORM = (b"POST /cart/add HTTP/1.1\r\nHost: shop.test\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        b"Content-Length: 230\r\n\r\n" + b"product=10243&note=" + b"x" * 211)
PAGE = b"<html>" + b"kettles " * 60 + b"</html>"
OK_LENGTH = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(PAGE) + PAGE
OK_CHUNKED = (b"HTTP/1.1 303 See Other\r\nLocation: /cart\r\nTransfer-Encoding: chunked\r\n\r\n"
              b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: 1\r\n\r\n")


def test_pcap_keepalive_out_of_order_retransmission_chunked(tmp_path):
    wrpcap(str(tmp_path / "c.pcap"), connection([SEARCH, FORM], [OK_LENGTH, OK_CHUNKED], shuffle=True))
    assert run_import(tmp_path / "c.pcap", tmp_path / "s") == 0
    session = tmp_path / "s"
    search, form = of_kind(session, "request")
    assert search["url"] == "http://shop.test/s?k=kettle+for+a+pregnant+mum"
    assert search["headers"] == [["Host", "shop.test"], ["Cookie", "a=1"]]
    assert read_body(session, form["body"]) == FORM.split(b"\r\n\r\n", 1)[1]
    assert of_kind(session, "form")[0]["fields"][0] == ["product", "10243"]
    page, redirect = of_kind(session, "response")
    assert read_body(session, page["body"]) == PAGE and page["request"] == search["seq"]
    assert read_body(session, redirect["body"]) == b"hello, world" and redirect["status"] == 303


def test_pcapng_tls_stream_is_noted_as_opaque_not_dropped(tmp_path):
    hello = b"\x16\x03\x01\x00\x05" + b"\x01\x00\x00\x01\x00"
    tls = connection([hello], [b"\x16\x03\x03\x00\x02\x02\x00"], client=("10.0.0.3", 50001),
                     server=("93.184.216.34", 443))
    plain = connection([SEARCH], [OK_LENGTH])
    with PcapNgWriter(str(tmp_path / "c.pcapng")) as w:
        for p in tls + plain:
            w.write(p)
    assert run_import(tmp_path / "c.pcapng", tmp_path / "s") == 0
    session = tmp_path / "s"
    assert of_kind(session, "import")[0]["counts"]["opaque_streams"] == 1
    notes = [r["message"] for r in of_kind(session, "error")]
    assert notes == ["tcp 10.0.0.3:50001 -> 93.184.216.34:443: TLS: encrypted, not decoded (17 bytes)"]
    assert len(of_kind(session, "request")) == 1


def test_pcap_read_until_close_and_unanswered_request(tmp_path):
    until_close = b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it"
    pkts = connection([SEARCH], [until_close])
    pkts += connection([SEARCH], [], client=("10.0.0.4", 50002))
    wrpcap(str(tmp_path / "c.pcap"), pkts)
    run_import(tmp_path / "c.pcap", tmp_path / "s")
    session = tmp_path / "s"
    assert read_body(session, of_kind(session, "response")[0]["body"]) == b"all of it"
    assert [r["message"] for r in of_kind(session, "error")] == ["no complete response in the capture"]


# --- bad input -------------------------------------------------------------------------------


def bad_har(tmp_path: Path) -> Path:
    path = tmp_path / "cut.har"
    path.write_bytes((FIXTURES / "chrome-devtools.har").read_bytes()[:900])
    return path


def bad_pcap(tmp_path: Path) -> Path:
    wrpcap(str(tmp_path / "full.pcap"), connection([SEARCH], [OK_LENGTH]))
    path = tmp_path / "cut.pcap"
    path.write_bytes((tmp_path / "full.pcap").read_bytes()[:-30])
    return path


def bad_mitm(tmp_path: Path) -> Path:
    flow_file(tmp_path / "full.mitm")
    path = tmp_path / "cut.mitm"
    path.write_bytes((tmp_path / "full.mitm").read_bytes()[:-40])
    return path


def foreign(tmp_path: Path) -> Path:
    path = tmp_path / "notes.txt"
    path.write_text("just some text\n")
    return path


def wrong_structure(tmp_path: Path) -> Path:
    har = json.loads((FIXTURES / "chrome-devtools.har").read_text())
    har["log"]["entries"][2]["request"]["url"] = 42
    path = tmp_path / "odd.har"
    path.write_text(json.dumps(har))
    return path


@pytest.mark.parametrize("make, position, expected", [
    (bad_har, "line 14 column 46", "valid JSON (Unterminated string"),
    (bad_pcap, "packet", "the file is truncated"),
    (bad_mitm, "flow 5", "a mitmproxy flow"),
    (foreign, "byte 0", "a HAR file"),
    (wrong_structure, "log.entries[2].request.url", "a string"),
])
def test_bad_input_is_one_line_exit_2_and_no_session(tmp_path, capsys, make, position, expected):
    source = make(tmp_path)
    out = tmp_path / "runs" / "s"
    assert run_import(source, out) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith(f"spillage: {source}: {position}") and expected in err
    assert not (tmp_path / "runs").exists() or list((tmp_path / "runs").iterdir()) == []


def test_import_refuses_an_existing_folder(tmp_path, capsys):
    (tmp_path / "s").mkdir()
    assert run_import(FIXTURES / "chrome-devtools.har", tmp_path / "s") == 2
    assert "already exists" in capsys.readouterr().err


def test_pcap_segment_never_captured_is_noted_as_a_broken_stream(tmp_path):
    pkts = connection([SEARCH, FORM], [OK_LENGTH, OK_CHUNKED])
    lost = next(i for i, p in enumerate(pkts) if b"product=" in bytes(p[TCP].payload))
    wrpcap(str(tmp_path / "c.pcap"), pkts[:lost] + pkts[lost + 1:])
    run_import(tmp_path / "c.pcap", tmp_path / "s")
    session = tmp_path / "s"
    assert of_kind(session, "import")[0]["counts"]["broken_streams"] == 1
    assert len(of_kind(session, "response")) == 1          # the search, before the gap
    note = of_kind(session, "error")[-1]["message"]
    assert note.startswith("tcp 10.0.0.2:50000 -> 10.0.0.1:80: HTTP not read on:") and "after 1 exchanges" in note


# --- what real recorders write (tests/test_real_tools.py has their actual files) --------------

PAGE_HTML = b"<html>kettles</html>"
BEACON = b'{"t":"impression","page":"https://shop.test/"}'
CART_FORM = b"product_id=10250&variant=0&qty=1"


def har_entry(method: str, url: str, status: int, *, request_headers=(), response_headers=(), post=None,
              body_size: int = 0, content=None, **extra) -> dict:
    """One entry as Playwright writes it (fields this importer reads)."""
    request = {"method": method, "url": url, "httpVersion": "HTTP/1.1", "cookies": [],
               "headers": [{"name": k, "value": v} for k, v in request_headers], "queryString": [],
               "headersSize": -1, "bodySize": body_size}
    if post is not None:
        request["postData"] = post
    response = {"status": status, "statusText": "", "httpVersion": "HTTP/1.1", "cookies": [],
                "headers": [{"name": k, "value": v} for k, v in response_headers],
                "content": content if content is not None else {"size": 0, "mimeType": "x-unknown"},
                "redirectURL": "", "headersSize": -1, "bodySize": -1}
    response.update(extra.pop("response", {}))
    return {"startedDateTime": "2026-12-01T06:37:45.845Z", "time": 5, "request": request, "response": response,
            "cache": {}, "timings": {"send": 0, "wait": 5, "receive": 0}, **extra}


def playwright_har(entries: list[dict]) -> dict:
    return {"log": {"version": "1.2", "creator": {"name": "Playwright", "version": "1.65.1"},
                    "browser": {"name": "chromium", "version": "150.0.7871.100"}, "pages": [], "entries": entries}}


def attach_entries() -> list[dict]:
    """A page, a beacon and its 204 as record_har_content="attach" writes them: bodies in `_file`s."""
    text = "text/plain;charset=UTF-8"
    return [
        har_entry("GET", "https://shop.test/", 200, content={"size": len(PAGE_HTML), "mimeType": "text/html",
                                                             "_file": "a1.html"}),
        har_entry("POST", "https://metrics.test/collect", 204, request_headers=[("Content-Type", text)],
                  post={"mimeType": text, "text": "", "params": [], "_file": "b2.txt"}, body_size=len(BEACON),
                  content={"size": -1, "mimeType": "x-unknown"}),
    ]


def test_playwright_attach_mode_reads_bodies_from_its_zip_or_beside_the_har(tmp_path, capsys):
    files = {"a1.html": PAGE_HTML, "b2.txt": BEACON}
    with zipfile.ZipFile(tmp_path / "pw.zip", "w") as z:
        z.writestr("har.har", json.dumps(playwright_har(attach_entries())))
        for name, data in files.items():
            z.writestr(name, data)
    (tmp_path / "beside").mkdir()
    (tmp_path / "beside" / "pw.har").write_text(json.dumps(playwright_har(attach_entries())))
    for name, data in files.items():
        (tmp_path / "beside" / name).write_bytes(data)
    for source in (tmp_path / "pw.zip", tmp_path / "beside" / "pw.har"):
        out = tmp_path / f"s-{source.suffix[1:]}"
        assert run_import(source, out) == 0
        page, beacon = of_kind(out, "request")
        assert read_body(out, of_kind(out, "response")[0]["body"]) == PAGE_HTML
        assert read_body(out, beacon["body"]) == BEACON and of_kind(out, "beacon")[0]["event"] == "impression"
        assert of_kind(out, "response")[1]["body"] is None and of_kind(out, "error") == []  # 204: empty, known
        assert "unknown_bodies" not in of_kind(out, "import")[0]["counts"]
    (tmp_path / "beside" / "b2.txt").unlink()
    assert run_import(tmp_path / "beside" / "pw.har", tmp_path / "s-lost") == 0
    assert of_kind(tmp_path / "s-lost", "request")[1]["body"] is None
    lacks = of_kind(tmp_path / "s-lost", "import")[0]["lacks"]
    assert "bodies whose attached files are missing (HAR attach mode)" in lacks


def test_omitted_bodies_are_unknown_counted_and_said(tmp_path, capsys):
    form = "application/x-www-form-urlencoded"
    entries = [har_entry("POST", "https://shop.test/cart/add", 303, request_headers=[("Content-Type", form)],
                         post={"mimeType": form, "text": "", "params": []}, body_size=len(CART_FORM),
                         response_headers=[("Location", "/cart")], content={"size": 40, "mimeType": "text/html"})]
    (tmp_path / "omit.har").write_text(json.dumps(playwright_har(entries)))
    assert run_import(tmp_path / "omit.har", tmp_path / "s") == 0
    session = tmp_path / "s"
    cart = of_kind(session, "request")[0]
    assert cart["body"] is None and of_kind(session, "response")[0]["body"] is None   # unknown, not b""
    assert of_kind(session, "form") == []
    assert [(e["request"], e["message"]) for e in of_kind(session, "error")] == [
        (cart["seq"], "request body is not in the imported file: unknown, not empty"),
        (cart["seq"], "response body is not in the imported file: unknown, not empty")]
    provenance = of_kind(session, "import")[0]
    assert provenance["counts"]["unknown_bodies"] == 2
    assert provenance["lacks"] == ["beacons sent as a page unloads (browser-recorded HAR)",
                                   "the browser's own requests, such as /favicon.ico (Playwright HAR)",
                                   "request bodies (HAR omit mode)", "response bodies (HAR omit mode)"]
    err = capsys.readouterr().err
    assert "2 bodies are not in the file: unknown, not empty" in err
    assert f"omit.har lacks: {'; '.join(provenance['lacks'])}" in err
    assert json.loads((session / "meta.json").read_text())["import"]["lacks"] == provenance["lacks"]
    assert f"the file lacks {'; '.join(provenance['lacks'])}" in verify(session).summary()


def test_entry_without_response_is_a_request_and_an_error_never_status_minus_1(tmp_path):
    entries = [har_entry("POST", "https://metrics.test/collect", -1, post={"mimeType": "text/plain", "text": "{}"},
                         body_size=2, content={"size": -1, "mimeType": "x-unknown"},
                         response={"_failureText": "net::ERR_ABORTED"})]
    (tmp_path / "x.har").write_text(json.dumps(playwright_har(entries)))
    assert run_import(tmp_path / "x.har", tmp_path / "s") == 0
    assert of_kind(tmp_path / "s", "response") == []
    assert [e["message"] for e in of_kind(tmp_path / "s", "error")] == ["net::ERR_ABORTED"]
    assert "answers to requests the browser cancelled (HAR)" in of_kind(tmp_path / "s", "import")[0]["lacks"]
    assert main(["export", str(tmp_path / "s"), "--format", "pcap", "--out", str(tmp_path / "x.pcap")]) == 0
    assert b"HTTP/1.1 -1" not in (tmp_path / "x.pcap").read_bytes()


@pytest.mark.parametrize("method, status, headers, unknown", [
    ("POST", 204, [], False),
    ("GET", 304, [], False),
    ("GET", 101, [], False),
    ("HEAD", 200, [], False),
    ("POST", 303, [("content-length", "0")], False),   # a redirect whose body Playwright did not keep
    ("GET", 200, [], True),
])
def test_bodiless_answers_are_empty_not_unknown(tmp_path, method, status, headers, unknown):
    entries = [har_entry(method, "https://shop.test/x", status, response_headers=headers,
                         content={"size": -1, "mimeType": "x-unknown"})]
    (tmp_path / "x.har").write_text(json.dumps(playwright_har(entries)))
    assert run_import(tmp_path / "x.har", tmp_path / "s") == 0
    assert of_kind(tmp_path / "s", "response")[0]["status"] == status
    assert bool(of_kind(tmp_path / "s", "import")[0]["counts"].get("unknown_bodies")) == unknown


def test_playwright_cache_hit_never_crossed_the_wire(tmp_path):
    page = {"size": 5, "mimeType": "text/html", "text": "hello"}
    entries = [har_entry("GET", "https://shop.test/p/1", 200, content=page, response={"_transferSize": 0, "headersSize": 135}),
               har_entry("POST", "https://shop.test/cart/add", 303, response_headers=[("content-length", "0")],
                         response={"_transferSize": 0, "headersSize": 0})]   # a redirect: sizes unknown, sent
    (tmp_path / "x.har").write_text(json.dumps(playwright_har(entries)))
    assert run_import(tmp_path / "x.har", tmp_path / "s") == 0
    assert [r["url"] for r in of_kind(tmp_path / "s", "request")] == ["https://shop.test/cart/add"]


@pytest.mark.parametrize("types, fields", [
    (["application/x-www-form-urlencoded", "application/x-www-form-urlencoded"],   # chrome-har
     [["product_id", "10250"], ["variant", "0"], ["qty", "1"]]),
    (["application/x-www-form-urlencoded", "text/plain"], None),                   # no one can tell
])
def test_repeated_content_type_is_one_media_type_when_its_values_agree(tmp_path, types, fields):
    post = {"mimeType": types[0], "text": CART_FORM.decode()}
    entries = [har_entry("POST", "https://shop.test/cart/add", 303, post=post, body_size=len(CART_FORM),
                         request_headers=[("Content-Type", types[0]), ("content-type", types[1])])]
    (tmp_path / "x.har").write_text(json.dumps({"log": {"creator": {"name": "chrome-har"}, "entries": entries}}))
    assert run_import(tmp_path / "x.har", tmp_path / "s") == 0
    assert [f["fields"] for f in of_kind(tmp_path / "s", "form")] == ([fields] if fields else [])


@pytest.mark.parametrize("change, expected", [
    ({"response": {"status": 1000}}, "log.entries[1]: a response record the capture schema accepts (status: 1000 is"),
    ({"request": {"method": "GE T"}}, "log.entries[1]: a request record the capture schema accepts (method: 'GE T'"),
    ({"_flowId": ""}, "log.entries[1]: a request record the capture schema accepts (flow: '' should be non-empty"),
])
def test_a_record_the_schema_refuses_fails_the_import_naming_the_entry(tmp_path, capsys, change, expected):
    entries = attach_entries()
    for key, value in change.items():
        if isinstance(value, dict):
            entries[1][key].update(value)
        else:
            entries[1][key] = value
    (tmp_path / "odd.har").write_text(json.dumps(playwright_har(entries)))
    out = tmp_path / "runs" / "s"
    assert run_import(tmp_path / "odd.har", out) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"spillage: {tmp_path / 'odd.har'}: {expected}")
    assert list((tmp_path / "runs").iterdir()) == []


def test_mitm_flows_written_as_they_completed_are_logged_in_request_order(tmp_path):
    early, late = tflow.tflow(resp=True), tflow.tflow(resp=True)
    early.request.timestamp_start, late.request.timestamp_start = 100.0, 100.5
    with open(tmp_path / "f.mitm", "wb") as f:
        writer = mitmio.FlowWriter(f)
        writer.add(late)      # mitmdump -w writes a flow once its response is done
        writer.add(early)
    assert run_import(tmp_path / "f.mitm", tmp_path / "s") == 0
    assert [r["flow"] for r in of_kind(tmp_path / "s", "request")] == [early.id, late.id]


def test_the_importers_schema_check_is_jsonschemas(tmp_path):
    """check_record asks the compiled predicate first and jsonschema only of what it refuses: it refuses
    exactly what jsonschema (the flat rules of the record's kind) refuses, on the records of a session and
    thousands of mutations of them."""
    import copy
    import random

    from capture_helpers import records_of
    from capture_helpers import write_session as write_full_session
    from test_linecheck import mutated

    from spillage.proxy.formats.imports import InvalidRecord, check_record, record_validator

    write_full_session(tmp_path / "s")
    base = [r for r in records_of(tmp_path / "s") if r["kind"] not in ("signer", "checkpoint")]
    rng = random.Random(3)
    refused = 0
    for n in range(4000):
        record = mutated(rng.choice(base), rng) if n else copy.deepcopy(base[0])
        kind = record.get("kind")
        if not isinstance(kind, str) or kind in ("signer", "checkpoint", "import") or kind not in {r["kind"] for r in base}:
            continue
        fields = {k: v for k, v in record.items() if k not in ("v", "seq", "ts", "kind", "prev", "hash")}
        full = {"v": 2, "seq": 5, "ts": "2000-01-01T00:00:00.000000Z", "kind": kind, "prev": "0" * 64,
                "hash": "0" * 64, **fields}
        expected = next(record_validator(kind).iter_errors(full), None) is None
        try:
            check_record(kind, 5, fields)
            got = True
        except InvalidRecord:
            got = False
        assert got == expected, fields
        refused += not got
    assert refused > 500
