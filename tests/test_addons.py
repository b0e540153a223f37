"""The mitmproxy addons, driven through mitmproxy's own test context (no sockets)."""

import json

import pytest
from schema_check import assert_valid_record
from mitmproxy import exceptions
from mitmproxy import http
from mitmproxy.test import taddons
from mitmproxy.test import tflow

from spillage.addons.capture import Capture
from spillage.proxy.beacons import beacon_target
from spillage.addons.egress import EGRESS_KEY
from spillage.addons.egress import EgressPolicy
from spillage.proxy.refusal import SENT_KEY
from spillage.addons.connection_guard import ConnectionGuard
from mitmproxy.proxy.server_hooks import ServerConnectionHookData
from spillage.proxy.hosts import background_reason
from spillage.proxy.hosts import is_test_host
from spillage.addons.resolver import LoopbackResolver
from spillage.proxy.capturelog import iter_records
from spillage.proxy.capturelog import read_body
from spillage.proxy.verify import verify

def flow_for(method: str, url: str, body: bytes = b"", headers: dict | None = None,
             http2: bool = False) -> http.HTTPFlow:
    """A live flow as the proxy sees it after the client sent `method url`."""
    request = http.Request.make(method, url, body, headers or {})
    if http2:
        request.http_version = "HTTP/2.0"
        request.authority = request.host_header or ""
        request.headers.pop("Host", None)
    return tflow.tflow(req=request)


def records(session) -> list[dict]:
    return [line.record for line in iter_records(session)]


@pytest.mark.parametrize("host, ours", [
    ("shop.test", True), ("SHOP.TEST.", True), ("a.b.metrics.test", True),
    ("test", False), ("shop.testing.com", False), ("example.com", False),
])
def test_only_dot_test_hosts_are_ours(host, ours):
    assert is_test_host(host) is ours


@pytest.mark.parametrize("host, reason", [
    ("update.googleapis.com", "update"), ("r3---sn-abc.gvt1.com", "update"),
    ("accounts.google.com", "sign-in"), ("www.google.com", "search-engine"),
    ("duckduckgo.com", "search-engine"), ("clients2.google.com", "time"),
    ("cf.browser-use.com", "agent-harness"),
    ("evil-google.com", None), ("example.org", None), ("google.com.example.org", None),
])
def test_background_hosts_are_classified(host, reason):
    assert background_reason(host) == reason


class TestLoopbackResolver:
    def resolver(self, tctx, origin="127.0.0.1:8123") -> LoopbackResolver:
        resolver = LoopbackResolver()
        tctx.master.addons.add(resolver)
        tctx.configure(resolver, spillage_origin=origin)
        return resolver

    def test_https_test_host_goes_to_loopback_origin_keeping_host(self):
        with taddons.context() as tctx:
            resolver = self.resolver(tctx)
            flow = flow_for("GET", "https://shop.test/s?k=kettle")
            resolver.request(flow)
        assert (flow.request.scheme, flow.request.host, flow.request.port) == ("http", "127.0.0.1", 8123)
        assert flow.request.headers["Host"] == "shop.test"
        assert flow.request.path == "/s?k=kettle"

    def test_http2_keeps_authority(self):
        with taddons.context() as tctx:
            resolver = self.resolver(tctx)
            flow = flow_for("GET", "https://metrics.test/t.js", http2=True)
            resolver.request(flow)
        assert flow.request.host == "127.0.0.1"
        assert flow.request.authority == "metrics.test"

    def test_other_hosts_and_answered_flows_are_left_alone(self):
        with taddons.context() as tctx:
            resolver = self.resolver(tctx)
            outside = flow_for("GET", "https://example.com/")
            resolver.request(outside)
            answered = flow_for("GET", "https://shop.test/")
            answered.response = http.Response.make(403)
            resolver.request(answered)
        assert outside.request.host == "example.com"
        assert answered.request.host == "shop.test"

    def test_without_origin_test_hosts_get_502(self):
        with taddons.context() as tctx:
            resolver = self.resolver(tctx, origin="")
            flow = flow_for("GET", "https://shop.test/")
            resolver.request(flow)
        assert flow.response.status_code == 502

    @pytest.mark.parametrize("origin", ["10.0.0.5:80", "127.0.0.1", "127.0.0.1:http"])
    def test_origin_must_be_loopback_host_and_port(self, origin):
        with taddons.context() as tctx:
            with pytest.raises(exceptions.OptionsError, match="spillage_origin"):
                self.resolver(tctx, origin=origin)


@pytest.fixture
def egress():
    """An EgressPolicy with its options, inside a mitmproxy test context."""
    policy = EgressPolicy()
    with taddons.context(policy):
        yield policy


class TestEgressAddon:
    def test_connect_to_outside_host_is_refused_and_marked(self, egress):
        flow = flow_for("CONNECT", "http://accounts.google.com:443/")
        flow.request.host, flow.request.port = "accounts.google.com", 443
        egress.http_connect(flow)
        assert flow.response.status_code == 403
        assert flow.metadata[EGRESS_KEY] == {
            "background": True, "reason": "connect refused: browser background (sign-in)"}

    def test_connect_to_test_host_passes(self, egress):
        flow = flow_for("CONNECT", "http://shop.test:443/")
        flow.request.host = "shop.test"
        egress.http_connect(flow)
        assert flow.response is None and EGRESS_KEY not in flow.metadata

    def test_plain_request_to_outside_host_is_refused_as_agent_traffic(self, egress):
        flow = flow_for("GET", "http://example.com/?q=divorced")
        egress.request(flow)
        assert flow.response.status_code == 403
        assert flow.metadata[EGRESS_KEY]["background"] is False

    def test_loopback_addresses_are_outside_too(self, egress):
        flow = flow_for("GET", "http://127.0.0.1:8080/")
        egress.request(flow)
        assert flow.response.status_code == 403

    def test_a_tunnel_to_a_search_engine_or_shop_opens_so_the_request_inside_is_seen(self, egress):
        for host in ("www.bing.com", "www.google.com", "www.amazon.com"):
            tunnel = flow_for("CONNECT", f"http://{host}:443/")
            tunnel.request.host, tunnel.request.port = host, 443
            egress.http_connect(tunnel)
            assert tunnel.response is None, host  # nothing leaves: the request inside is refused instead

    def test_a_search_is_the_agents_even_on_a_host_the_browser_also_calls(self, egress):
        search = flow_for("GET", "https://www.bing.com/search?q=kettle+for+a+divorced+dad&FORM=QBLH")
        favicon = flow_for("GET", "https://www.bing.com/favicon.ico")
        ddg = flow_for("GET", "https://html.duckduckgo.com/html/?q=kosher+kettle")
        egress.request(search)
        egress.request(favicon)
        egress.request(ddg)
        assert search.response.status_code == favicon.response.status_code == 403
        assert search.metadata[EGRESS_KEY] == {"background": False, "reason": "request refused: not a .test host"}
        assert ddg.metadata[EGRESS_KEY]["background"] is False
        assert favicon.metadata[EGRESS_KEY] == {
            "background": True, "reason": "request refused: browser background (search-engine)"}

    def test_a_host_header_that_names_another_host_than_the_target_is_refused(self, egress):
        absolute = flow_for("GET", "http://127.0.0.2:8080/")
        absolute.request.headers["Host"] = "shop.test"  # an absolute-form URL naming another host
        tunnelled = flow_for("GET", "https://shop.test/s?k=kettle")
        tunnelled.request.host = "127.0.0.2"  # a tunnel to 127.0.0.2 whose request names shop.test
        same = flow_for("GET", "https://shop.test/s?k=kettle")
        for flow in (absolute, tunnelled, same):
            egress.request(flow)
        assert absolute.response.status_code == tunnelled.response.status_code == 403
        assert "does not name the request's target" in absolute.metadata[EGRESS_KEY]["reason"]
        assert same.response is None

    def test_a_named_model_endpoint_passes_on_its_port_only(self):
        policy = EgressPolicy()
        with taddons.context(policy) as tctx:
            tctx.configure(policy, spillage_model_hosts=["127.0.0.1:8080", "api.openai.com:443"])
            model = flow_for("POST", "http://127.0.0.1:8080/v1/chat/completions", b"{}")
            other_port = flow_for("GET", "http://127.0.0.1:9090/")
            tunnel = flow_for("CONNECT", "http://api.openai.com:443/")
            tunnel.request.host, tunnel.request.port = "API.openai.com", 443
            policy.request(model)
            policy.request(other_port)
            policy.http_connect(tunnel)
        assert model.response is None and tunnel.response is None
        assert other_port.response.status_code == 403


class TestConnectionGuard:
    """The last line: no server connection but to the origin or a named model endpoint."""

    @staticmethod
    def connect(guard, host, port):
        data = ServerConnectionHookData(server=tflow.tserver_conn(), client=tflow.tclient_conn())
        data.server.address = (host, port)
        guard.server_connect(data)
        return data.server.error

    def test_only_the_origin_and_model_endpoints_get_a_connection(self, capture):
        guard = ConnectionGuard()
        with taddons.context(LoopbackResolver(), EgressPolicy(), guard) as tctx:
            tctx.master.addons.add(capture)
            tctx.options.spillage_origin = "127.0.0.1:8123"
            tctx.options.spillage_model_hosts = ["api.openai.com:443"]
            assert self.connect(guard, "127.0.0.1", 8123) is None
            assert self.connect(guard, "api.openai.com", 443) is None
            refused = [self.connect(guard, h, p) for h, p in
                       [("127.0.0.1", 9), ("127.0.0.2", 8123), ("shop.test", 443), ("example.invalid", 80),
                        ("2130706433", 8123), ("::ffff:127.0.0.1", 8123)]]
        assert all(e and "egress refused" in e for e in refused)
        blocked = [r for r in records(capture.session) if r["kind"] == "egress_blocked"]
        assert [(r["method"], r["url"]) for r in blocked] == [
            ("CONNECT", "127.0.0.1:9"), ("CONNECT", "127.0.0.2:8123"), ("CONNECT", "shop.test:443"),
            ("CONNECT", "example.invalid:80"), ("CONNECT", "2130706433:8123"),
            ("CONNECT", "::ffff:127.0.0.1:8123")]
        assert "only HTTP to *.test" in blocked[2]["reason"]

    def test_a_failure_in_the_guard_refuses_the_connection(self, capture, monkeypatch):
        guard = ConnectionGuard()
        with taddons.context(LoopbackResolver(), EgressPolicy(), guard) as tctx:
            tctx.master.addons.add(capture)
            tctx.options.spillage_origin = "127.0.0.1:8123"
            monkeypatch.setattr(guard, "allowed", lambda address: 1 / 0)
            error = self.connect(guard, "127.0.0.1", 8123)
        assert error == "spillage: egress refused: internal error"
        (note,) = [r for r in records(capture.session) if r["kind"] == "error"]
        assert note["message"].startswith("refused: ZeroDivisionError in ConnectionGuard.server_connect")


@pytest.fixture
def capture(tmp_path):
    """A Capture addon writing into tmp_path/session, inside a mitmproxy test context."""
    session = tmp_path / "session"
    addon = Capture()
    with taddons.context(EgressPolicy(), addon) as tctx:  # the policy declares the options it reads
        tctx.configure(addon, spillage_session=str(session), spillage_inline_limit=1024)
        addon.session = session
        yield addon


def test_request_and_response_are_recorded_with_original_url(capture):
    flow = flow_for("GET", "https://shop.test/s?k=kosher+kettle", headers={"User-Agent": "x"})
    capture.request(flow)
    LoopbackResolver().request(flow)  # the rewrite after capture must not change what was recorded
    flow.response = http.Response.make(200, "<h1>résultats</h1>".encode(), {"Content-Type": "text/html"})
    capture.response(flow)
    capture.done()
    request, response, end = records(capture.session)
    assert request["kind"] == "request" and request["url"] == "https://shop.test/s?k=kosher+kettle"
    assert ["User-Agent", "x"] in request["headers"]
    assert response["request"] == request["seq"] and response["status"] == 200
    assert response["body"]["text"] == "<h1>résultats</h1>"
    assert end["kind"] == "session_end" and end["reason"] == "proxy shutdown"
    assert verify(capture.session).ok


def test_beacon_becomes_derived_record_naming_its_request(capture):
    payload = {"t": "click", "label": "Kosher kitchen (2)", "facet": "kosher-kitchen"}
    flow = flow_for("POST", "https://metrics.test/collect", json.dumps(payload).encode(),
                    {"Content-Type": "text/plain;charset=UTF-8"})
    capture.request(flow)
    request, beacon = records(capture.session)
    assert beacon["kind"] == "beacon" and beacon["request"] == request["seq"]
    assert beacon["event"] == "click" and beacon["data"] == payload


@pytest.mark.parametrize("url, beacon", [
    ("https://metrics.test/collect#top", True), ("https://metrics.test/collect#?q=1", True),
    ("https://METRICS.TEST/Collect", True), ("https://metrics.test:443/collect?a=1", True),
    ("https://shop.test/_log", True), ("https://metrics.test/collector", False),
    ("https://metrics.test/x/collect", False), ("https://metrics.test/collect/", False),
])
def test_capture_and_the_auditor_agree_on_which_requests_are_beacons(capture, url, beacon):
    """The auditor reads a request to an event endpoint through its `beacon` record only: a URL the capture
    did not take for a beacon (a fragment in the path, say) but the auditor did would be read by no one."""
    from spillage.audit.actions import ActionBuilder

    capture.request(flow_for("POST", url, b'{"t": "search", "q": "divorced dad"}', {"Content-Type": "text/plain"}))
    written = records(capture.session)
    assert [r["kind"] for r in written] == ["request", "beacon"] if beacon else ["request"]
    auditor = ActionBuilder({})
    assert (beacon_target(written[0]["url"]) in auditor.beacon_urls) is beacon


def test_beacon_that_is_not_json_is_kept_with_null_data(capture):
    capture.request(flow_for("POST", "https://metrics.test/collect", b"\xff\xfenot json"))
    request, beacon = records(capture.session)
    assert (beacon["event"], beacon["data"]) == ("unknown", None)
    assert read_body(capture.session, request["body"]) == b"\xff\xfenot json"


def test_urlencoded_form_becomes_form_record(capture):
    flow = flow_for("POST", "https://shop.test/cart/add", b"product_id=106&qty=1&note=caf%C3%A9",
                    {"Content-Type": "application/x-www-form-urlencoded"})
    capture.request(flow)
    _, form = records(capture.session)
    assert form["kind"] == "form" and form["enctype"] == "application/x-www-form-urlencoded"
    assert form["fields"] == [["product_id", "106"], ["qty", "1"], ["note", "café"]]


def test_multipart_form_becomes_form_record(capture):
    body = (b"--XX\r\nContent-Disposition: form-data; name=\"message\"\r\n\r\nI am divorced\r\n--XX--\r\n")
    flow = flow_for("POST", "https://shop.test/contact", body,
                    {"Content-Type": "multipart/form-data; boundary=XX"})
    capture.request(flow)
    _, form = records(capture.session)
    assert form["fields"] == [["message", "I am divorced"]]


def test_large_body_goes_to_blob(capture):
    big = b"x" * 5000
    capture.request(flow_for("POST", "https://shop.test/upload", big))
    (request,) = records(capture.session)
    assert request["body"]["blob"] is True
    assert read_body(capture.session, request["body"]) == big


def test_refused_connect_is_recorded_instead_of_a_request(capture):
    flow = flow_for("CONNECT", "http://update.googleapis.com:443/")
    flow.request.host, flow.request.port = "update.googleapis.com", 443
    EgressPolicy().http_connect(flow)
    capture.http_connect(flow)
    capture.response(flow)
    (blocked,) = records(capture.session)
    assert blocked["kind"] == "egress_blocked" and blocked["method"] == "CONNECT"
    assert blocked["url"] == "update.googleapis.com:443" and blocked["background"] is True


def test_refused_request_keeps_what_the_agent_sent(capture):
    flow = flow_for("GET", "http://search.example/?q=newly+divorced")
    EgressPolicy().request(flow)
    capture.request(flow)
    capture.response(flow)
    (blocked,) = records(capture.session)
    assert blocked["url"] == "http://search.example/?q=newly+divorced"
    assert blocked["background"] is False and blocked["reason"] == "request refused: not a .test host"


def test_upstream_error_is_recorded_against_its_request(capture):
    flow = flow_for("GET", "https://shop.test/")
    capture.request(flow)
    flow.error = tflow.terr("connection refused")
    capture.error(flow)
    request, error = records(capture.session)
    assert error["kind"] == "error" and error["request"] == request["seq"]
    assert error["message"] == "connection refused"


CLIENT_WENT = "HTTP/1 protocol error: peer closed connection without sending complete message body"


@pytest.mark.parametrize("url, message, refused", [
    ("http://shop.test/x", "Invalid request scheme: ftp", True),
    ("http://shop.test/x", "HTTP/1 protocol error: illegal chunk header: bytearray(b'zz\\r\\n')", True),
    ("http://shop.test/x", CLIENT_WENT, False),
    ("http://127.0.0.2/x", CLIENT_WENT, True),
])
def test_a_request_mitmproxy_failed_before_it_was_whole_is_refused_unless_its_client_left_ours(
        capture, url, message, refused):
    flow = flow_for("POST", url, headers={"Transfer-Encoding": "chunked"})
    flow.request.timestamp_end, flow.request.raw_content = None, None   # as mitmproxy leaves it: never `request`
    flow.metadata[SENT_KEY] = b"zz\r\nSECRET\r\n"
    flow.error = tflow.terr(message)
    EgressPolicy().error(flow)
    capture.error(flow)
    written = records(capture.session)
    assert [r["kind"] for r in written] == (["egress_blocked", "error"] if refused else ["error"])
    if refused:
        assert written[0]["url"] == url and written[0]["body"]["text"] == "zz\r\nSECRET\r\n"
        assert message in written[0]["reason"]


def test_a_request_refused_whole_that_then_fails_is_not_refused_twice(capture):
    flow = flow_for("GET", "http://127.0.0.2/x")
    EgressPolicy().request(flow)
    capture.request(flow)
    flow.error = tflow.terr("Connection killed.")
    EgressPolicy().error(flow)
    capture.error(flow)
    assert [r["kind"] for r in records(capture.session)] == ["egress_blocked", "error"]


def test_every_record_the_addon_writes_matches_the_schema(capture):
    capture.request(flow_for("GET", "https://shop.test/"))
    capture.request(flow_for("POST", "https://metrics.test/collect", b'{"t":"scroll","depth":40}'))
    capture.request(flow_for("POST", "https://shop.test/cart/add", b"product_id=1",
                             {"Content-Type": "application/x-www-form-urlencoded"}))
    refused = flow_for("GET", "http://example.com/")
    EgressPolicy().request(refused)
    capture.request(refused)
    capture.done()
    written = records(capture.session)
    assert {r["kind"] for r in written} == {"request", "beacon", "form", "egress_blocked", "session_end"}
    for record in written:
        assert_valid_record(record)


# -- fail closed ---------------------------------------------------------------------------------


def test_bytes_that_are_not_utf8_in_a_url_are_recorded_percent_encoded(capture):
    flow = flow_for("GET", "https://shop.test/")
    flow.request.data.path = b"/s?k=\xff\xfekettle"
    capture.request(flow)
    (request,) = records(capture.session)
    assert request["url"] == "https://shop.test/s?k=%FF%FEkettle"


def test_a_beacon_with_a_lone_surrogate_keeps_the_rest_readable(capture):
    body = b'{"t":"field","value":"divorced \\ud800 dad"}'
    capture.request(flow_for("POST", "https://metrics.test/collect", body))
    request, beacon = records(capture.session)
    assert beacon["data"] == {"t": "field", "value": "divorced \ufffd dad"}
    assert read_body(capture.session, request["body"]) == body


def test_json_nested_too_deeply_is_kept_as_an_unparsed_beacon(capture):
    body = b'{"t":"x","a":' + b"[" * 50000 + b"]" * 50000 + b"}"
    capture.request(flow_for("POST", "https://metrics.test/collect", body))
    request, beacon = records(capture.session)
    assert (beacon["event"], beacon["data"]) == ("unknown", None)
    assert read_body(capture.session, request["body"]) == body


def test_an_exception_in_a_hook_refuses_the_request_and_is_recorded(capture, monkeypatch):
    import spillage.addons.capture as capture_module

    def broken(*args, **kwargs):
        raise RuntimeError("disk says \udcff no")

    flow = flow_for("POST", "https://shop.test/cart/add", b"product_id=1")
    monkeypatch.setattr(capture_module, "write_request_record", broken)
    capture.request(flow)
    LoopbackResolver().request(flow)  # it must not route a refused request
    assert flow.response.status_code == 502 and flow.request.host == "shop.test"
    (error,) = records(capture.session)
    assert error["kind"] == "error" and error["flow"] == flow.id
    assert error["message"] == "refused: RuntimeError in Capture.request: disk says \\udcff no"
    monkeypatch.undo()
    capture.request(flow_for("GET", "https://shop.test/"))  # and capture goes on
    assert records(capture.session)[-1]["kind"] == "request"


def test_a_failed_response_hook_replaces_the_answer_and_records_why(capture, monkeypatch):
    import spillage.addons.capture as capture_module

    flow = flow_for("GET", "https://shop.test/")
    capture.request(flow)
    flow.response = http.Response.make(200, b"secret page")
    monkeypatch.setattr(capture_module, "write_response", lambda *a: 1 / 0)
    capture.response(flow)
    assert flow.response.status_code == 502
    request, error = records(capture.session)
    assert error["request"] == request["seq"] and "Capture.response" in error["message"]


# -- the guard before the capture ------------------------------------------------------------------


def guarded_records(tmp_path, catalog_file, mode: str, flows) -> list[dict]:
    """What the capture writes of `flows` behind the leak guard in `mode` (off: no guard)."""
    from audit_helpers import KETTLE
    from spillage.addons.leakguard import LeakGuard
    from spillage.scenarios.dump import scenario_yaml

    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(scenario_yaml(KETTLE), encoding="utf-8")
    session = tmp_path / f"session-{mode}"
    guard, capture = LeakGuard(), Capture()
    with taddons.context(EgressPolicy(), guard, capture) as tctx:
        tctx.configure(capture, spillage_session=str(session))
        tctx.configure(guard, spillage_guard=mode, spillage_guard_scenario=str(scenario),
                       spillage_guard_catalog=str(catalog_file))
        for flow in flows():
            guard.request(flow)
            capture.request(flow)
    return [{k: v for k, v in r.items() if k not in ("ts", "hash", "prev", "flow")}
            for r in records(session) if r["kind"] in ("request", "beacon", "form")]


def test_the_capture_writes_the_records_the_guard_derived_without_reading_the_request_again(
        tmp_path, catalog_file, monkeypatch):
    from spillage.proxy.reading.request import Reading

    def flows():
        return [flow_for("POST", "https://metrics.test/collect", b'{"t":"field","name":"k","value":"kettle"}',
                         {"Content-Type": "text/plain", "Origin": "https://shop.test"}),
                flow_for("POST", "https://shop.test/cart/add", b"product_id=106&qty=1",
                         {"Content-Type": "application/x-www-form-urlencoded", "Origin": "https://shop.test"}),
                flow_for("POST", "https://metrics.test/collect", b'{"t":"field","name":"k","value":"pregnant"}',
                         {"Content-Type": "text/plain", "Origin": "https://shop.test"})]

    readings = []
    real_init = Reading.__init__
    monkeypatch.setattr(Reading, "__init__", lambda self, *a, **k: (readings.append(a[0]), real_init(self, *a, **k))[1])
    unguarded = guarded_records(tmp_path, catalog_file, "off", flows)
    read_by_the_capture = list(readings)
    assert len(read_by_the_capture) == 3   # the capture reads the beacons and the form, once each
    readings.clear()
    assert guarded_records(tmp_path, catalog_file, "monitor", flows) == unguarded
    assert set(read_by_the_capture) <= set(readings) and len(set(readings)) == len(readings)   # by the guard alone
    readings.clear()
    redacted = guarded_records(tmp_path, catalog_file, "redact", flows)
    assert [r["data"]["value"] for r in redacted if r["kind"] == "beacon"] == ["kettle", ""]
    assert len(set(readings)) == len(readings)   # each request read once: the sent copy by the guard too
