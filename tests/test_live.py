"""Live sites (`--live`): requests to allowed real hosts reach them, captured and signed; every other
route stays refused and recorded. The internet is fake (tests/fake_internet.py): our own HTTPS servers
on 127.0.0.3-6 with a test CA, reached through the tests' resolver map, never DNS; a listener of ours on
127.0.0.2 stands for every address that is not allowed and must receive zero bytes."""

from __future__ import annotations

import json
import os
import re
import socket
import ssl
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import test_egress_seal
from fake_internet import FakeInternet
from schema_check import assert_valid_audit
from test_egress_seal import OUTSIDE
from test_egress_seal import outside  # noqa: F401 - the listener on 127.0.0.2, a fixture of this module too
from test_egress_seal import blocked
from test_egress_seal import proxy_address
from test_egress_seal import tunnel

from spillage.audit.observers import registrable_domain
from spillage.audit.observers import tracker_list
from spillage.proxy.capturelog import iter_records
from spillage.proxy.live import FAKE_INTERNET_ENV
from spillage.proxy.live import FakeInternet as ResolverMap
from spillage.proxy.live import LiveError
from spillage.proxy.live import is_public
from spillage.proxy.live import live_hosts
from spillage.addons.mitm.ca import ensure_ca
from spillage.addons.mitm.launcher import mitmdump_command
from spillage.proxy.signing import load_or_create_key
from spillage.runner.children import ChildError
from spillage.runner.stack import Stack

SPILLAGE = [sys.executable, "-m", "spillage.runner.cli"]


# --- fast: patterns, addresses, parties ------------------------------------------------------------


def test_patterns_name_hosts_and_their_subdomains_on_their_ports(tmp_path):
    listed = tmp_path / "hosts.txt"
    listed.write_text("# the shops\nwww.ebay.com\n\n*.ebay.com:8443  # the API\n", encoding="utf-8")
    assert live_hosts(["www.amazon.com,*.amazon.com", f"@{listed}", "WWW.Amazon.com."]) == (
        "www.amazon.com", "*.amazon.com", "www.ebay.com", "*.ebay.com:8443")
    from spillage.proxy.live import parse_live

    (exact, sub) = parse_live(["www.amazon.com,*.amazon.com"])
    assert exact.matches("WWW.AMAZON.COM.", 443) and exact.matches("www.amazon.com", 80)
    assert not exact.matches("www.amazon.com", 8443) and not exact.matches("xwww.amazon.com", 443)
    assert sub.matches("a.b.amazon.com", 443) and not sub.matches("amazon.com", 443)
    assert not sub.matches("amazon.com.evil.com", 443) and not sub.matches("evilamazon.com", 443)


@pytest.mark.parametrize("value, said", [
    ("1.2.3.4", "'1.2.3.4': name a real host"),
    ("2130706434", "name a real host"),
    ("shop.test", "name a real host"),
    ("*.*.amazon.com", "is no host name nor *.NAME pattern"),
    ("www.amazon.com:0", "the port must be a number"),
    ("www.amazon.com,", "has an empty host"),
])
def test_a_bad_pattern_says_what_and_where(value, said):
    with pytest.raises(LiveError, match=f"^--live: .*{re.escape(said)}"):
        live_hosts([value])


def test_a_bad_pattern_file_names_its_line(tmp_path):
    listed = tmp_path / "hosts.txt"
    listed.write_text("www.amazon.com\n10.0.0.1\n", encoding="utf-8")
    with pytest.raises(LiveError, match=f"^{listed}:2: '10.0.0.1'"):
        live_hosts([f"@{listed}"])
    with pytest.raises(LiveError, match="cannot read the live hosts file"):
        live_hosts([f"@{tmp_path / 'missing.txt'}"])


def test_only_global_unicast_addresses_are_public():
    assert is_public("93.184.216.34") and is_public("2606:2800:220:1::1")
    for address in ("127.0.0.1", "10.1.2.3", "192.168.0.1", "172.16.0.1", "169.254.169.254", "100.64.0.1",
                    "0.0.0.0", "::1", "::ffff:127.0.0.1", "fe80::1%eth0", "fc00::1", "224.0.0.1", "nonsense"):
        assert not is_public(address), address


def test_the_resolver_map_is_refused_outside_the_tests(tmp_path, monkeypatch):
    path = tmp_path / "map.json"
    path.write_text(json.dumps({"hosts": {"www.amazon.com": "127.0.0.3"}, "public": ["127.0.0.3"], "ca": "x"}))
    assert ResolverMap.load(str(path)).resolve("WWW.amazon.com.") == ["127.0.0.3"]
    path.write_text(json.dumps({"hosts": {"www.amazon.com": "93.184.216.34"}, "public": [], "ca": "x"}))
    with pytest.raises(LiveError, match="loopback addresses only"):
        ResolverMap.load(str(path))
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    with pytest.raises(LiveError, match="for tests only"):
        ResolverMap.load(str(path))


def test_the_name_guard_looks_up_live_hosts_only_and_only_to_public_addresses():
    """The proxy's resolver, with DNS stood in for by a function that says what it was asked."""
    import asyncio

    from spillage.addons.names import REFUSED
    from spillage.addons.names import NameGuard
    from spillage.proxy.live import parse_live

    asked, answers = [], {"www.amazon.com": ["93.184.216.34", "2606:2800:220:1::1"], "evil.amazon.com": ["93.184.216.34", "10.0.0.7"],
                          "gpu-box": ["192.168.1.20"]}

    async def dns(host, port, *args, **kwargs):
        asked.append(host)
        if host not in answers:
            raise OSError("Name or service not known")
        return [(0, 1, 6, "", (a, port)) for a in answers[host]]

    guard = NameGuard()
    guard.live, guard.names = parse_live(["*.amazon.com,missing.example.com"]), frozenset({"gpu-box:11434"})

    def look_up(host, port):
        return asyncio.run(guard.getaddrinfo(dns, host, port, type=1))

    assert [i[4][0] for i in look_up("WWW.amazon.com.", 443)] == ["93.184.216.34", "2606:2800:220:1::1"]
    assert look_up("gpu-box", 11434)[0][4][0] == "192.168.1.20"   # a model endpoint: as it resolves
    for host, port, said in [("www.evil.com", 443, "www.evil.com is not a live host; it is not looked up"),
                             ("www.amazon.com", 8080, "is not a live host"),
                             ("evil.amazon.com", 443, "resolves to 93.184.216.34, 10.0.0.7, not only to public"),
                             ("missing.example.com", 443, "does not resolve (Name or service not known)")]:
        with pytest.raises(OSError, match=re.escape(REFUSED) + ".*" + re.escape(said)):
            look_up(host, port)
    assert asked == ["www.amazon.com", "gpu-box", "evil.amazon.com", "missing.example.com"]   # never www.evil.com


def test_without_live_the_proxy_is_told_nothing_new(tmp_path, monkeypatch):
    monkeypatch.setenv(FAKE_INTERNET_ENV, str(tmp_path / "map.json"))
    argv = " ".join(mitmdump_command(ensure_ca(tmp_path / "ca"), "127.0.0.1:1", None))
    assert "spillage_live" not in argv and "ssl_verify_upstream" not in argv and "ssl_insecure" not in argv


def test_parties_go_by_registrable_domain_and_trackers_by_organisation():
    assert registrable_domain("www.amazon.co.uk") == "amazon.co.uk"
    assert registrable_domain("m.media-amazon.com") == "media-amazon.com"
    assert registrable_domain("shop.test") == "shop.test" and registrable_domain("127.0.0.1") == "127.0.0.1"
    trackers = tracker_list()
    assert trackers is not None, "the tracker list is installed by make (make trackerdb)"
    assert trackers.lookup("www.google-analytics.com")["organisation"] == "Google"
    assert trackers.lookup("c.amazon-adsystem.com")["category"] == "advertising"
    assert trackers.lookup("shop.test") is None


# --- end to end: the proxy with live hosts on the fake internet ------------------------------------


@pytest.fixture(scope="module")
def internet(tmp_path_factory, outside):
    fake = FakeInternet(tmp_path_factory.mktemp("internet")).start(outside.server_address[1])
    yield fake
    fake.stop()


def live_proxy(tmp_path_factory, catalog_file, internet, name: str):
    """Origins and proxy, the fake internet's hosts allowed, capturing into session `name`."""
    home = tmp_path_factory.mktemp("home")
    session = tmp_path_factory.mktemp("runs") / name
    session.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(FAKE_INTERNET_ENV, str(internet.map_file))
        with Stack(session, ensure_ca(home / "ca"), load_or_create_key(home), catalog=catalog_file,
                   live=live_hosts(internet.live()), log=lambda m: None) as running:
            yield running


@pytest.fixture(scope="module")
def live_stack(tmp_path_factory, catalog_file, internet):
    yield from live_proxy(tmp_path_factory, catalog_file, internet, "live")


@pytest.fixture(scope="module")
def escapes_stack(tmp_path_factory, catalog_file, internet):
    """A proxy of its own, for test_egress_seal's escapes (which count the records of theirs)."""
    yield from live_proxy(tmp_path_factory, catalog_file, internet, "escapes")


@pytest.mark.e2e
@pytest.mark.parametrize("escapes", [test_egress_seal.test_every_escape_is_refused_recorded_and_reaches_no_one,
                                     test_egress_seal.test_every_protocol_inside_a_tunnel_is_refused_and_reaches_no_one,
                                     test_egress_seal.test_refused_attempts_that_never_become_a_request_are_recorded_too],
                         ids=lambda test: test.__name__.removeprefix("test_"))
def test_every_route_refused_without_live_is_refused_with_it(escapes_stack, outside, escapes):
    escapes(escapes_stack, outside)


def fetch(stack: Stack, url: str, data: bytes | None = None, headers: dict | None = None) -> tuple[int, bytes]:
    """`url` through the proxy, trusting its CA: (status, body)."""
    context = ssl.create_default_context(cafile=str(stack.ca.cert_file))
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({"https": stack.proxy_url, "http": stack.proxy_url}),
                                         urllib.request.HTTPSHandler(context=context))
    try:
        with opener.open(urllib.request.Request(url, data=data, headers=headers or {}), timeout=20) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def records(stack: Stack) -> list[dict]:
    return [line.record for line in iter_records(stack.session_dir)]


@pytest.mark.e2e
def test_a_live_host_is_reached_and_every_request_and_response_is_captured(live_stack, internet):
    amazon, tracker = internet.sites["www.amazon.com"], internet.sites["www.google-analytics.com"]
    status, page = fetch(live_stack, internet.url("www.amazon.com") + "/s?k=kettle+safe+when+pregnant")
    assert status == 200 and b"Gooseneck Electric Kettle" in page
    status, _ = fetch(live_stack, internet.url("www.google-analytics.com") + "/g/collect?v=2&en=search",
                      b"ep.search_term=kosher+kettle", {"Referer": internet.url("www.amazon.com") + "/s"})
    assert status == 204
    assert amazon.requests[-1]["path"] == "/s?k=kettle+safe+when+pregnant"
    assert tracker.requests[-1]["body"] == b"ep.search_term=kosher+kettle"
    log = records(live_stack)
    start = next(r for r in log if r["kind"] == "session_start")   # after the signer's record, before any traffic
    assert start["seq"] == 1 and start["options"]["live"] == internet.live()
    assert start["options"]["live_map"] == str(internet.map_file)
    sent = {r["url"]: r for r in log if r["kind"] == "request"}
    search = sent[internet.url("www.amazon.com") + "/s?k=kettle+safe+when+pregnant"]
    (answer,) = [r for r in log if r["kind"] == "response" and r["request"] == search["seq"]]
    assert answer["status"] == 200 and ["Set-Cookie", "session-id=131-0000000-0000000; Domain=.amazon.com; Path=/; Secure"] \
        in answer["headers"]
    assert internet.url("www.google-analytics.com") + "/g/collect?v=2&en=search" in sent


@pytest.mark.e2e
def test_requests_in_one_tunnel_to_a_live_host_share_one_connection_to_it(live_stack, internet):
    """The guard hands mitmproxy the address it resolved, then gives the connection its name back, so
    that the next request to that host finds it (one TLS handshake upstream, not one per request)."""
    import http.client

    amazon = internet.sites["www.amazon.com"]
    before = amazon.connections
    host, port = proxy_address(live_stack)
    client = http.client.HTTPSConnection(host, port, timeout=20,
                                         context=ssl.create_default_context(cafile=str(live_stack.ca.cert_file)))
    client.set_tunnel("www.amazon.com", amazon.port)
    for n in range(20):
        client.request("GET", f"/s?k=kettle+{n}")
        answer = client.getresponse()
        assert answer.status == 200 and b"Gooseneck" in answer.read()
    client.close()
    assert amazon.connections - before == 1


@pytest.mark.e2e
def test_a_bad_certificate_and_dns_rebinding_are_refusals_with_a_record(live_stack, internet, outside):
    bad = internet.sites["images.amazon.com"]
    status, _ = fetch(live_stack, internet.url("images.amazon.com") + "/?q=pregnant")
    assert status == 502 and bad.requests == []
    status, _ = fetch(live_stack, f"https://rebind.amazon.com:{outside.server_address[1]}/?q=pregnant")
    assert status == 502
    with outside.lock:
        assert (outside.connections, bytes(outside.received)) == (0, b"")
    reasons = [r["reason"] for r in blocked(live_stack)]
    assert any(r.startswith("tls refused: the certificate of the live host images.amazon.com does not verify")
               and "certificate verify failed" in r.lower() for r in reasons), reasons
    assert any("rebind.amazon.com resolves to 127.0.0.2, not only to public addresses" in r for r in reasons), reasons


def sni_request(stack: Stack, target: str, sni: str, request: bytes) -> bytes:
    """CONNECT `target`, TLS with `sni` (trusting anything), `request`; the answer's head."""
    sock, head = tunnel(stack, target)
    assert head.startswith(b"HTTP/1.1 200"), head
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    with context.wrap_socket(sock, server_hostname=sni) as tls:
        tls.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data and (chunk := tls.recv(4096)):
            data += chunk
        return data


@pytest.mark.e2e
def test_every_other_route_stays_refused_with_live_hosts_allowed(live_stack, internet, outside):
    amazon = internet.sites["www.amazon.com"]
    target = f"www.amazon.com:{amazon.port}"
    before = (amazon.connections, len(amazon.requests))
    # another host, another port of an allowed host, a name under an allowed one that is not allowed
    assert fetch(live_stack, "https://www.evil.com/?q=pregnant")[0] == 403
    assert fetch(live_stack, "https://www.amazon.com:8443/?q=pregnant")[0] == 403
    assert fetch(live_stack, f"https://smile.amazon.com:{amazon.port}/?q=pregnant")[0] == 403
    # raw TCP in a tunnel to the live host
    sock, head = tunnel(live_stack, target)
    with sock:
        assert head.startswith(b"HTTP/1.1 200")
        sock.sendall(b"\x00SECRET raw bytes\r\n")
        try:
            assert sock.recv(4096) == b""
        except (TimeoutError, ConnectionResetError):
            pass
    # TLS naming another host, a Host header naming another, a WebSocket
    get = f"GET /s?k=pregnant HTTP/1.1\r\nHost: {target}\r\n\r\n".encode()
    assert sni_request(live_stack, target, "evil.invalid", get).startswith(b"HTTP/1.1 403")
    assert sni_request(live_stack, target, "www.amazon.com",
                       b"GET /s?k=pregnant HTTP/1.1\r\nHost: www.evil.com\r\n\r\n").startswith(b"HTTP/1.1 403")
    upgrade = (f"GET /ws HTTP/1.1\r\nHost: {target}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").encode()
    assert sni_request(live_stack, target, "www.amazon.com", upgrade).startswith(b"HTTP/1.1 403")
    # absolute-form to the outside address, and the live name in absolute form to another port
    with socket.create_connection(proxy_address(live_stack), timeout=5) as sock:
        port = outside.server_address[1]
        sock.sendall(f"GET http://{OUTSIDE}:{port}/?q=pregnant HTTP/1.1\r\nHost: {OUTSIDE}:{port}\r\n\r\n".encode())
        assert sock.recv(4096).startswith(b"HTTP/1.1 403")
    assert (amazon.connections, len(amazon.requests)) == before
    with outside.lock:
        assert (outside.connections, bytes(outside.received)) == (0, b"")
    reasons = [r["reason"] for r in blocked(live_stack)]
    for said in ("request refused: not a .test host", "TLS named 'evil.invalid'", "does not name the request's target",
                 "a WebSocket to a live host",
                 "connect refused: a live host is reached by the HTTP requests let through, nothing else"):
        assert any(said in r for r in reasons), (said, reasons)


@pytest.mark.e2e
def test_the_resolver_map_stops_a_proxy_outside_the_tests(tmp_path, catalog_file, internet, monkeypatch):
    monkeypatch.setenv(FAKE_INTERNET_ENV, str(internet.map_file))
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    session = tmp_path / "session"
    session.mkdir()
    with pytest.raises(ChildError):
        with Stack(session, ensure_ca(tmp_path / "ca"), load_or_create_key(tmp_path), catalog=catalog_file,
                   live=("www.amazon.com",), log=lambda m: None):
            pass
    assert "a resolver map is for tests only" in (session / "proxy.log").read_text()


@pytest.mark.e2e
def test_a_proxy_told_not_to_verify_upstream_certificates_does_not_start(tmp_path, catalog_file):
    ca = ensure_ca(tmp_path / "ca")
    (ca.confdir / "config.yaml").write_text("ssl_insecure: true\n", encoding="utf-8")
    session = tmp_path / "session"
    session.mkdir()
    with pytest.raises(ChildError):
        with Stack(session, ca, load_or_create_key(tmp_path), catalog=catalog_file, log=lambda m: None):
            pass
    assert "ssl_insecure: the proxy verifies every upstream certificate" in (session / "proxy.log").read_text()


# --- end to end: a scripted agent through `spillage run --live`, audited and guarded ---------------

AGENT = textwrap.dedent("""\
    import sys, urllib.request
    amazon, ebay, tracker = sys.argv[1:4]
    def go(url, data=None, referer=None):
        request = urllib.request.Request(url, data=data, headers={"Referer": referer} if referer else {})
        try:
            print(urllib.request.urlopen(request, timeout=20).status)
        except OSError as e:
            print("refused", getattr(e, "code", e))
    go(amazon + "/s?k=gooseneck+kettle+safe+when+pregnant")
    go(amazon + "/s?k=gooseneck+kettle&rh=n%3A284507%2Cp_n_feature_browse-bin%3A2229001")
    go(amazon + "/dp/B0TESTKTL2")
    go(tracker + "/g/collect?v=2&en=view_search_results", b"ep.search_term=kosher+kettle+sabbath+mode",
       amazon + "/s?k=gooseneck+kettle")
    go(ebay + "/sch/i.html?_nkw=gooseneck+kettle+laid+off+budget")
""")


def live_run(tmp_path: Path, internet, *extra: str) -> tuple[Path, dict]:
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT, encoding="utf-8")
    env = {**os.environ, FAKE_INTERNET_ENV: str(internet.map_file)}
    done = subprocess.run([*SPILLAGE, "run", "--scenario", "shop-kettle-chat",
                           "--live", ",".join(internet.live()), *extra, "--audit", "--", sys.executable, str(agent),
                           internet.url("www.amazon.com"), internet.url("www.ebay.com"),
                           internet.url("www.google-analytics.com")],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    session = Path(done.stdout.strip().splitlines()[0])
    return session, json.loads((session / "audit.json").read_text())


@pytest.mark.e2e
@pytest.mark.needs_tool("bwrap")   # the agent in its sandbox, as every run
def test_a_scripted_agent_on_live_sites_is_audited_by_observer_and_organisation(tmp_path, internet):
    session, report = live_run(tmp_path, internet)
    meta = json.loads((session / "meta.json").read_text())
    assert meta["live"] == {"hosts": internet.live(), "real_web": False, "resolver_map": str(internet.map_file)}
    assert_valid_audit(report)
    observers = {o["observer"]: o for o in report["observers"]}
    assert report["first_party"] == "amazon.com"
    assert observers["amazon.com"]["party"] == "first-party" and observers["amazon.com"]["organisation"] == "Amazon"
    assert "pregnant" in observers["amazon.com"]["received"]["attributes"]
    tracker = observers["www.google-analytics.com"]
    assert (tracker["domain"], tracker["party"], tracker["organisation"]) == ("google-analytics.com", "third-party", "Google")
    assert "kosher" in tracker["received"]["attributes"]
    assert "laid-off" in observers["ebay.com"]["received"]["attributes"]
    # what the agent chose, labelled as the live pages showed it: a product opened by its ASIN alone, a
    # refinement chosen by its number
    chosen = {(a["what"], a["text"]): a["n"] for a in report["actions"]}
    viewed = chosen[("view_product", "Kosher Kitchen Electric Kettle, Keep Warm")]
    filtered = chosen[("filter", "Shabbat Mode")]
    assert any(e["action"] == viewed and (e["category"], e["attribute"]) == ("B_E", "kosher") for e in report["events"])
    assert any(e["action"] == filtered and (e["category"], e["attribute"]) == ("B_I", "kosher") for e in report["events"])
    assert observers["ebay.com"]["party"] == "third-party"
    assert report["tracker_list"]["name"] == "@ghostery/trackerdb"
    shown = subprocess.run([*SPILLAGE, "inspect", str(session), "--html", str(tmp_path / "inspect.html")],
                           capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "<td>www.google-analytics.com</td><td>google-analytics.com</td><td>third-party</td><td>Google</td>" in (
        tmp_path / "inspect.html").read_text()
    shown = subprocess.run([*SPILLAGE, "inspect", str(session)], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert "observer www.google-analytics.com  google-analytics.com  third-party  Google  received kosher" in shown.stdout

    reported = subprocess.run([*SPILLAGE, "report", str(session.parent), "--out", str(tmp_path / "report"), "--quiet"],
                              capture_output=True, text=True, timeout=240)
    assert reported.returncode == 0, reported.stderr
    rows = (tmp_path / "report" / "observers.csv").read_text().splitlines()
    assert rows[0] == "session,observer,domain,party,organisation,category,actions,attributes"
    assert any(",www.google-analytics.com,google-analytics.com,third-party,Google,site_analytics,0,kosher" in r for r in rows)
    assert "| Google | third-party | 1 | 1 | kosher |" in (tmp_path / "report" / "report.md").read_text()
    # a shareable file, and a proof of one leaking request, both saying the session touched the real web
    for redact in ([], ["--redact-cookies"]):
        exported = subprocess.run([*SPILLAGE, "export", str(session), "--format", "har", "--out",
                                   str(tmp_path / "live.har"), *redact], capture_output=True, text=True, timeout=120)
        assert exported.returncode == 0 and "touched the real web (live hosts www.amazon.com:" in exported.stderr
        har = (tmp_path / "live.har").read_text()
        assert ("131-0000000-0000000" in har) == (not redact)
    assert "session-id=REDACTED; Domain=.amazon.com; Path=/; Secure" in har
    leak = next(e for e in report["events"] if e["attribute"] == "pregnant")
    proved = subprocess.run([*SPILLAGE, "prove", str(session), "--seq", str(leak["seq"])], capture_output=True,
                            text=True, timeout=120)
    assert proved.returncode == 0 and "touched the real web" in proved.stderr and "as captured" in proved.stderr


@pytest.mark.e2e
@pytest.mark.needs_tool("bwrap")   # the agent in its sandbox, as every run
def test_the_guard_stops_the_leaks_to_live_hosts(tmp_path, internet):
    amazon, tracker = internet.sites["www.amazon.com"], internet.sites["www.google-analytics.com"]
    seen = len(amazon.requests), len(tracker.requests)
    session, report = live_run(tmp_path, internet, "--guard", "block")
    said = b"".join(r["path"].encode() + r["body"] for r in [*amazon.requests[seen[0]:], *tracker.requests[seen[1]:]])
    assert b"pregnant" not in said and b"kosher" not in said
    assert report["summary"]["leaked_attributes"] == []
    # the two searches that say it, the tracker's event, and the product that the refined search's page
    # called kosher (the refinement passes: the page that named it, the first search's, was never sent)
    assert report["guard"]["by_action"] == {"block": 4}
    assert report["guard"]["by_observer"] == {"first_party": 3, "third_party": 1}
    assert "/dp/B0TESTKTL2" not in [r["path"] for r in amazon.requests[seen[0]:]]


@pytest.mark.e2e
def test_proxy_start_with_live_hosts_captures_them_and_says_so(tmp_path, internet):
    import signal

    from run_helpers import start_proxy

    proxy, shown = start_proxy(tmp_path, "--live", f"www.ebay.com:{internet.sites['www.ebay.com'].port}",
                               env={**os.environ, FAKE_INTERNET_ENV: str(internet.map_file)})
    try:
        assert shown["live"].startswith(f"www.ebay.com:{internet.sites['www.ebay.com'].port} (reached on the real web")
        context = ssl.create_default_context(cafile=shown["ca"])
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({"https": shown["proxy"]}),
                                             urllib.request.HTTPSHandler(context=context))
        with opener.open(internet.url("www.ebay.com") + "/sch/i.html?_nkw=film+camera", timeout=20) as answer:
            assert answer.status == 200 and b"s-item__link" in answer.read()
        with pytest.raises(urllib.error.HTTPError, match="403"):
            opener.open(internet.url("www.amazon.com") + "/s?k=film+camera", timeout=20)
    finally:
        proxy.send_signal(signal.SIGINT)
        proxy.wait(60)
    session = Path(shown["session"])
    assert proxy.returncode == 0, proxy.stderr.read()
    meta = json.loads((session / "meta.json").read_text())
    assert meta["live"]["hosts"] == [f"www.ebay.com:{internet.sites['www.ebay.com'].port}"]
    urls = [(r.record["kind"], r.record.get("url")) for r in iter_records(session)]
    assert ("request", internet.url("www.ebay.com") + "/sch/i.html?_nkw=film+camera") in urls
    assert ("egress_blocked", internet.url("www.amazon.com") + "/s?k=film+camera") in urls


def test_run_and_proxy_start_refuse_a_bad_live_pattern_in_one_line(tmp_path):
    for argv in (["run", "--scenario", "shop-kettle-chat", "--live", "10.0.0.1", "--", "true"],
                 ["proxy", "start", "--live", f"@{tmp_path / 'nowhere.txt'}"]):
        done = subprocess.run([*SPILLAGE, *argv], capture_output=True, text=True, cwd=tmp_path, timeout=60)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert done.stderr.startswith(("spillage: --live: '10.0.0.1'", f"spillage: {tmp_path / 'nowhere.txt'}: cannot read"))
        assert not (tmp_path / "runs").exists()


def test_a_matrix_names_its_live_hosts_and_a_bad_one_by_its_line(tmp_path):
    from spillage.runner.batch import run_arguments
    from spillage.runner.matrix import MatrixError
    from spillage.runner.matrix import load_matrix

    (tmp_path / "hosts.txt").write_text("*.ebay.com\n", encoding="utf-8")
    matrix = tmp_path / "live.yaml"
    body = "scenarios: [shop-kettle-chat]\nframeworks: [browser-use]\nmodels: [scripted:minimal]\n"
    matrix.write_text(body + "live: [www.amazon.com, '@hosts.txt']\n", encoding="utf-8")
    loaded = load_matrix(matrix)
    assert loaded.live == ("www.amazon.com", "*.ebay.com")
    assert run_arguments(loaded, loaded.runs[0], False)[-2:] == ["--live", "www.amazon.com,*.ebay.com"]
    matrix.write_text(body + "live: [www.amazon.com, 127.0.0.1]\n", encoding="utf-8")
    with pytest.raises(MatrixError, match=r"live.yaml:4: live: '127.0.0.1': name a real host"):
        load_matrix(matrix)
