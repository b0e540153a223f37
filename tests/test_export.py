"""`spillage export`: sessions as HAR, mitmproxy flows and pcap, read back by the tools people use
(mitmdump, tshark) and by `spillage import` (docs/CAPTURE_FILES.md)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mitmproxy import io as mitmio

from spillage.audit.session_audit import audit_session
from spillage.proxy.formats import exports
from spillage.proxy.capturelog import iter_records
from spillage.runner.cli import main

FIXTURES = Path(__file__).parent / "fixtures" / "captures"
SCENARIO = "shop-kettle-chat"
MITMDUMP = Path(sys.executable).with_name("mitmdump")
needs_tshark = pytest.mark.needs_tool("tshark")


def imported(source: Path, out: Path, *extra: str) -> Path:
    assert main(["import", str(source), "--scenario", SCENARIO, "--out", str(out), "--no-catalog", *extra]) == 0
    return out


def export(session: Path, fmt: str, out: Path) -> Path:
    assert main(["export", str(session), "--format", fmt, "--out", str(out)]) == 0
    return out


def traffic(session: Path) -> list[tuple]:
    """What a round trip must keep: every request (or refusal) and response, headers and body."""
    out = []
    for line in iter_records(session):
        r = line.record
        body = (r.get("body") or {}).get("sha256")
        if r["kind"] in ("request", "egress_blocked"):
            out.append((r["kind"], r["method"], r["url"], r["headers"], body))
        elif r["kind"] == "response":
            out.append(("response", r["status"], r["reason"], r["headers"], body))
    return out


@pytest.fixture
def session(tmp_path) -> Path:
    return imported(FIXTURES / "chrome-devtools.har", tmp_path / "orig")


# --- HAR -------------------------------------------------------------------------------------

ENTRY = {"startedDateTime": str, "time": (int, float), "request": dict, "response": dict, "cache": dict,
         "timings": dict}
REQUEST = {"method": str, "url": str, "httpVersion": str, "cookies": list, "headers": list,
           "queryString": list, "headersSize": int, "bodySize": int}
RESPONSE = {"status": int, "statusText": str, "httpVersion": str, "cookies": list, "headers": list,
            "content": dict, "redirectURL": str, "headersSize": int, "bodySize": int}


def assert_fields(obj: dict, spec: dict, where: str) -> None:
    for name, kind in spec.items():
        assert isinstance(obj.get(name), kind), f"{where}.{name} must be {kind}"


def test_har_export_is_valid_har_1_2(session, tmp_path):
    har = json.loads(export(session, "har", tmp_path / "x.har").read_text())["log"]
    assert har["version"] == "1.2" and har["creator"]["name"] == "spillage" and "version" in har["creator"]
    assert len(har["entries"]) == 6
    for n, entry in enumerate(har["entries"]):
        assert_fields(entry, ENTRY, f"entries[{n}]")
        assert_fields(entry["request"], REQUEST, f"entries[{n}].request")
        assert_fields(entry["response"], RESPONSE, f"entries[{n}].response")
        assert isinstance(entry["response"]["content"].get("size"), int)
        assert isinstance(entry["response"]["content"].get("mimeType"), str)
        assert all(isinstance(entry["timings"][k], (int, float)) and entry["timings"][k] >= 0
                   for k in ("send", "wait", "receive"))
        assert entry["startedDateTime"].endswith("Z")
    search = har["entries"][0]
    assert search["request"]["queryString"] == [{"name": "k", "value": "gooseneck kettle pregnant"}]
    assert search["response"]["content"]["text"] == "<h1>Kettles for you é</h1>"
    png = har["entries"][3]["response"]["content"]
    assert png["encoding"] == "base64" and png["text"] == "iVBORw0KGgo="


# --- mitmproxy flows -------------------------------------------------------------------------


def test_mitm_export_reads_with_flowreader_and_mitmdump(session, tmp_path):
    path = export(session, "mitm", tmp_path / "x.mitm")
    with open(path, "rb") as f:
        flows = list(mitmio.FlowReader(f).stream())
    assert [fl.request.pretty_url for fl in flows][:2] == ["http://shop.test/s?k=gooseneck+kettle+pregnant",
                                                          "http://metrics.test/collect"]
    assert flows[0].response.content.decode() == "<h1>Kettles for you é</h1>"
    shown = subprocess.run([str(MITMDUMP), "-nr", str(path), "--set", "flow_detail=1"],
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "POST http://shop.test/cart/add" in shown.stdout and "<< 303 See Other" in shown.stdout


# --- pcap ------------------------------------------------------------------------------------


@needs_tshark
def test_pcap_export_is_dissected_by_tshark(session, tmp_path):
    path = export(session, "pcap", tmp_path / "x.pcap")
    fields = subprocess.run(
        ["tshark", "-r", str(path), "-Y", "http.request", "-T", "fields",
         "-e", "http.request.method", "-e", "http.host", "-e", "http.request.uri"],
        capture_output=True, text=True, timeout=60)
    assert fields.returncode == 0, fields.stderr
    rows = [line.split("\t") for line in fields.stdout.splitlines()]
    assert rows == [["GET", "shop.test", "/s?k=gooseneck+kettle+pregnant"],
                    ["POST", "metrics.test", "/collect"],
                    ["POST", "shop.test", "/cart/add"],
                    ["GET", "shop.test", "/img/10243.png"],
                    ["GET", "shop.test", "/static/t.js"],
                    ["GET", "www.google.com", "/search?q=kettle+safe+in+pregnancy"]]
    codes = subprocess.run(["tshark", "-r", str(path), "-Y", "http.response", "-T", "fields",
                            "-e", "http.response.code"], capture_output=True, text=True, timeout=60)
    assert codes.stdout.split() == ["200", "204", "303", "200", "200"]


def test_pcap_segments_respect_the_mss(tmp_path):
    from scapy.utils import rdpcap
    from scapy.layers.inet import TCP

    big = tmp_path / "big.har"
    har = json.loads((FIXTURES / "chrome-devtools.har").read_text())
    har["log"]["entries"][0]["response"]["content"]["text"] = "x" * 10_000
    har["log"]["entries"][0]["response"]["headers"][1]["value"] = "10000"
    big.write_text(json.dumps(har))
    path = export(imported(big, tmp_path / "s"), "pcap", tmp_path / "x.pcap")
    packets = rdpcap(str(path))
    sizes = [len(p[TCP].payload) for p in packets]
    assert max(sizes) == 1460 and sum(p[TCP].flags.S for p in packets) == 12   # SYN, SYN-ACK × 6
    assert sum(bool(p[TCP].flags.F) for p in packets) == 12


# --- round trips and atomic output -----------------------------------------------------------


@pytest.mark.parametrize("fmt", ["har", "mitm", "pcap"])
def test_round_trip_keeps_requests_headers_bodies(session, tmp_path, fmt):
    again = imported(export(session, fmt, tmp_path / f"x.{fmt}"), tmp_path / "again")
    assert traffic(again) == traffic(session)


def test_failed_export_leaves_no_file_and_keeps_the_old_one(session, tmp_path, monkeypatch, capsys):
    out = tmp_path / "x.har"
    out.write_text("old")

    real = exports.session_exchanges

    def broken(session_dir):
        yield from list(real(session_dir))[:2]
        raise ValueError("disk trouble")

    monkeypatch.setattr(exports, "session_exchanges", broken)
    assert main(["export", str(session), "--format", "har", "--out", str(out)]) == 2
    assert out.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["orig", "x.har"]
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_export_refuses_a_damaged_log(session, tmp_path, capsys):
    log = session / "capture.jsonl"
    log.write_text(log.read_text().replace("gooseneck", "goosefeck", 1))
    assert main(["export", str(session), "--format", "har", "--out", str(tmp_path / "x.har")]) == 1
    assert "modified" in capsys.readouterr().err and not (tmp_path / "x.har").exists()


# --- end to end: a real scripted session -----------------------------------------------------


@pytest.fixture(scope="module")
def real_session(tmp_path_factory) -> Path:
    runs = tmp_path_factory.mktemp("runs")
    done = subprocess.run([sys.executable, "-m", "spillage.runner.cli", "run", "--scenario", SCENARIO,
                           "--agent", "browser-use", "--model", "scripted:oversharer", "--runs-dir", str(runs)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return Path(done.stdout.strip().splitlines()[-1])


def events(session: Path) -> list[tuple]:
    report = audit_session(session)
    return sorted((e["category"], e["attribute"], report["actions"][e["action"] - 1]["what"],
                   report["actions"][e["action"] - 1]["text"]) for e in report["events"])


def wire_view(rows: list[tuple]) -> list[tuple]:
    """A pcap carries HTTP/1.1: an HTTP/2 request (refused ones too) gains a Host header from its authority,
    and the bytes a refused tunnel carried (a browser's TLS hello to a host it may not reach) a Content-Length."""
    def artefact(row: tuple, name: str) -> bool:
        return name == "Host" or (name == "Content-Length" and row[:2] == ("egress_blocked", "CONNECT"))

    return [(*r[:3], [h for h in r[3] if not artefact(r, h[0])], r[4]) if r[0] in ("request", "egress_blocked") else r
            for r in rows]


@pytest.mark.e2e
@pytest.mark.parametrize("fmt", ["har", "mitm", "pcap"])
def test_real_session_round_trip_audits_to_the_same_events(real_session, tmp_path, fmt):
    file = export(real_session, fmt, tmp_path / f"x.{fmt}")
    again = tmp_path / "again"
    assert main(["import", str(file), "--scenario", SCENARIO, "--out", str(again)]) == 0
    before, after = traffic(real_session), traffic(again)
    assert len(after) == len(before) > 100
    if fmt == "pcap":
        before, after = wire_view(before), wire_view(after)
    assert sorted(map(repr, after)) == sorted(map(repr, before))
    assert [r for r in after if r[0] != "response"] == [r for r in before if r[0] != "response"]
    original = events(real_session)
    assert original and events(again) == original
