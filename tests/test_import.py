"""`spillage import`: HAR, mitmproxy flow and pcap files into session folders (docs/CAPTURE_FILES.md).

pcaps are built here packet by packet with scapy's own layers, independently of our pcap writer.
"""

import hashlib
import json
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
    assert [r["flow"] for r in of_kind(session, "request")] == [flows[0].id, flows[2].id, flows[3].id]
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
def test_bad_input_is_one_line_exit_1_and_no_session(tmp_path, capsys, make, position, expected):
    source = make(tmp_path)
    out = tmp_path / "runs" / "s"
    assert run_import(source, out) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith(f"spillage import: {source}: {position}") and expected in err
    assert not (tmp_path / "runs").exists() or list((tmp_path / "runs").iterdir()) == []


def test_import_refuses_an_existing_folder(tmp_path, capsys):
    (tmp_path / "s").mkdir()
    assert run_import(FIXTURES / "chrome-devtools.har", tmp_path / "s") == 1
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
