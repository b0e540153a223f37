"""Nothing the agent sends reaches a host that is not ours, by any route: a listener of our own on
127.0.0.2 is the outside world, and every escape is thrown at the real proxy (mitmdump with our
addons, real origins). The listener must receive zero bytes, every attempt must be an
`egress_blocked` record, and capture must go on through hostile input."""

from __future__ import annotations

import json
import socket
import socketserver
import ssl
import threading
import time

import h2.connection
import h2.events
import pytest

from spillage.proxy.capturelog import iter_records
from spillage.addons.mitm.ca import ensure_ca
from spillage.proxy.signing import fingerprint
from spillage.proxy.signing import load_or_create_key
from spillage.proxy.signing import raw_public
from spillage.proxy.verify import verify
from spillage.runner.stack import Stack

pytestmark = pytest.mark.e2e

OUTSIDE = "127.0.0.2"
DECIMAL = str(int.from_bytes(socket.inet_aton(OUTSIDE), "big"))   # 2130706434
HEX = "0x" + socket.inet_aton(OUTSIDE).hex()                       # 0x7f000002


class Outside(socketserver.ThreadingTCPServer):
    """A listener on 127.0.0.2 that counts every connection and byte it receives."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        self.connections = 0
        self.received = bytearray()
        self.lock = threading.Lock()
        super().__init__((OUTSIDE, 0), self.Handler)

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            server = self.server
            with server.lock:
                server.connections += 1
            self.request.settimeout(2)
            try:
                while chunk := self.request.recv(65536):
                    with server.lock:
                        server.received += chunk
                    self.request.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 7\r\n\r\nescaped")
            except OSError:
                pass


@pytest.fixture(scope="module")
def outside():
    server = Outside()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def stack(tmp_path_factory, catalog_file):
    home = tmp_path_factory.mktemp("home")
    session = tmp_path_factory.mktemp("runs") / "escapes"
    session.mkdir()
    with Stack(session, ensure_ca(home / "ca"), load_or_create_key(home), catalog=catalog_file,
               log=lambda m: None) as running:
        yield running


def proxy_address(stack: Stack) -> tuple[str, int]:
    host, port = stack.proxy_url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def tunnel(stack: Stack, target: str) -> tuple[socket.socket, bytes]:
    """A socket through `CONNECT target` and the proxy's answer to it."""
    sock = socket.create_connection(proxy_address(stack), timeout=5)
    sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    return sock, read_head(sock)


def read_head(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def raw_exchange(stack: Stack, payload: bytes) -> bytes:
    """Send `payload` to the proxy on a plain connection; what comes back before it closes."""
    with socket.create_connection(proxy_address(stack), timeout=5) as sock:
        sock.sendall(payload)
        return read_head(sock)


def raw_tcp(stack: Stack, target: str, data: bytes) -> bytes:
    """CONNECT `target`, then bytes that are neither TLS nor HTTP; what comes back."""
    sock, head = tunnel(stack, target)
    with sock:
        assert head.startswith(b"HTTP/1.1 200"), head
        sock.sendall(data)
        try:
            return sock.recv(4096)
        except (TimeoutError, ConnectionResetError):
            return b""


def tls_request(stack: Stack, target: str, sni: str, request: bytes, alpn: list[str] | None = None) -> bytes:
    """CONNECT `target`, TLS with `sni` (trusting anything), then `request`; the answer's head."""
    sock, head = tunnel(stack, target)
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    if alpn:
        context.set_alpn_protocols(alpn)
    with context.wrap_socket(sock, server_hostname=sni) as tls:
        tls.sendall(request)
        return read_head(tls)


def h2_request(stack: Stack, target: str, path: str, sni: str = "evil.invalid") -> str:
    """CONNECT `target`, TLS with `sni` negotiating HTTP/2, one GET `path`; the answer's :status."""
    sock, head = tunnel(stack, target)
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    with context.wrap_socket(sock, server_hostname=sni) as tls:
        assert tls.selected_alpn_protocol() == "h2"
        conn = h2.connection.H2Connection()
        conn.initiate_connection()
        conn.send_headers(1, [(":method", "GET"), (":scheme", "https"), (":authority", target), (":path", path)],
                          end_stream=True)
        tls.sendall(conn.data_to_send())
        while True:
            for event in conn.receive_data(tls.recv(65536)):
                if isinstance(event, h2.events.ResponseReceived):
                    return dict(event.headers)[b":status"].decode()
            tls.sendall(conn.data_to_send())


def blocked(stack: Stack) -> list[dict]:
    return [line.record for line in iter_records(stack.session_dir) if line.record["kind"] == "egress_blocked"]


def test_every_escape_is_refused_recorded_and_reaches_no_one(stack, outside):
    port = outside.server_address[1]
    target = f"{OUTSIDE}:{port}"

    # raw TCP through a tunnel, by every spelling of the address, and to a name that must not be looked up
    for where in (target, f"{DECIMAL}:{port}", f"{HEX}:{port}", f"[::ffff:{OUTSIDE}]:{port}", f"{OUTSIDE}.:{port}",
                  "nowhere.invalid:443", "shop.test:443"):
        assert raw_tcp(stack, where, b"\x00SECRET raw bytes\r\n") in (b"",), where
    # TLS with any SNI, HTTP/1 and HTTP/2 inside
    for sni in ("evil.invalid", "shop.test", OUTSIDE):
        head = tls_request(stack, target, sni, f"GET /?q=divorced HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        assert head.startswith(b"HTTP/1.1 403"), (sni, head)
    head = tls_request(stack, target, "shop.test", b"GET / HTTP/1.1\r\nHost: shop.test\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 403"), head  # a tunnel to 127.0.0.2 whose request names shop.test
    assert h2_request(stack, target, "/?q=laid+off") == "403"
    # absolute-form URLs, Host mismatches, other spellings, trailing dots, a WebSocket upgrade
    for host in (target, f"{DECIMAL}:{port}", f"{HEX}:{port}", f"[::ffff:{OUTSIDE}]:{port}", f"{OUTSIDE}.:{port}"):
        assert raw_exchange(stack, f"GET http://{host}/x HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
                            ).startswith(b"HTTP/1.1 403"), host
    assert raw_exchange(stack, f"GET http://{target}/ HTTP/1.1\r\nHost: shop.test\r\n\r\n".encode()
                        ).startswith(b"HTTP/1.1 403")
    assert raw_exchange(stack, f"GET http://shop.test/ HTTP/1.1\r\nHost: {target}\r\n\r\n".encode()
                        ).startswith(b"HTTP/1.1 403")
    upgrade = (f"GET http://{target}/ws HTTP/1.1\r\nHost: {target}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").encode()
    assert raw_exchange(stack, upgrade).startswith(b"HTTP/1.1 403")

    with outside.lock:
        assert (outside.connections, bytes(outside.received)) == (0, b"")
    refused = blocked(stack)
    raw = [r for r in refused if r["method"] == "CONNECT" and "SECRET raw bytes" in json.dumps(r["body"])]
    assert len(raw) == 7
    assert {r["url"] for r in raw} >= {target, "nowhere.invalid:443", "shop.test:443"}
    assert any("q=laid+off" in r["url"] and r["method"] == "GET" for r in refused)
    assert any("does not name the request's target" in r["reason"] for r in refused)
    assert any(r["url"] == f"http://{target}/ws" for r in refused)
    log = (stack.session_dir / "proxy.log").read_text()
    assert "Name or service not known" not in log and "getaddrinfo" not in log  # no outside name was looked up


def in_tunnel(stack: Stack, target: str, data: bytes, sni: str | None = None) -> bytes:
    """CONNECT `target`, TLS with `sni` when given, then `data`; what comes back (b"" when closed)."""
    sock, head = tunnel(stack, target)
    assert head.startswith(b"HTTP/1.1 200"), head
    if sni is not None:
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        sock = context.wrap_socket(sock, server_hostname=sni)
    with sock:
        sock.sendall(data)
        try:
            return read_head(sock)
        except (TimeoutError, ConnectionResetError, ssl.SSLError):
            return b""


def test_every_protocol_inside_a_tunnel_is_refused_and_reaches_no_one(stack, outside):
    target = f"{OUTSIDE}:{outside.server_address[1]}"
    websocket = (f"GET /ws HTTP/1.1\r\nHost: {target}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").encode()
    plain = f"GET /?q=divorced HTTP/1.1\r\nHost: {target}\r\n\r\n".encode()
    assert in_tunnel(stack, target, plain).startswith(b"HTTP/1.1 403")            # HTTP/1 in a tunnel, no TLS
    assert in_tunnel(stack, target, websocket).startswith(b"HTTP/1.1 403")        # ws:// in a tunnel
    for sni in ("evil.invalid", "shop.test"):
        assert in_tunnel(stack, target, websocket, sni).startswith(b"HTTP/1.1 403"), sni   # wss://
        assert not in_tunnel(stack, target, b"\x00\x01SECRET not http\r\n\r\n", sni).startswith(b"HTTP/1.1 2"), sni
    for sni in ("shop.test", OUTSIDE):
        assert h2_request(stack, target, "/?q=single+dad", sni) == "403", sni
    with outside.lock:
        assert (outside.connections, bytes(outside.received)) == (0, b"")
    refused = blocked(stack)
    assert any(r["url"].endswith("/ws") and r["method"] == "GET" for r in refused)
    assert any("q=single+dad" in r["url"] for r in refused)


def closed_after(stack: Stack, payload: bytes, then: bytes | None = None) -> bytes:
    """Send `payload` to the proxy (and, once it answers, `then`), close the connection; the answer."""
    with socket.create_connection(proxy_address(stack), timeout=5) as sock:
        sock.sendall(payload)
        head = read_head(sock)
        if then is not None:
            sock.sendall(then)
    return head


def test_refused_attempts_that_never_become_a_request_are_recorded_too(stack, outside):
    """A tunnel to the outside with nothing in it, or text with no blank line, or an HTTP/2 preface; an
    absolute URL mitmproxy answers 400 itself: nothing reaches the listener, each is an egress_blocked."""
    target = f"{OUTSIDE}:{outside.server_address[1]}"
    connect = f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode()
    before = {r["seq"] for r in blocked(stack)}
    assert closed_after(stack, connect).startswith(b"HTTP/1.1 200")
    assert closed_after(stack, connect, b"GET /?q=pregnant HTTP/1.1\r\nHost: x").startswith(b"HTTP/1.1 200")
    assert closed_after(stack, connect, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").startswith(b"HTTP/1.1 200")
    userinfo = f"GET http://shop.test@{target}/?q=divorced HTTP/1.1\r\nHost: shop.test\r\n\r\n".encode()
    assert closed_after(stack, userinfo).startswith(b"HTTP/1.1 400")
    with outside.lock:
        assert (outside.connections, bytes(outside.received)) == (0, b"")
    deadline = time.monotonic() + 30   # each is recorded once the proxy has seen its client go
    while len(new := [r for r in blocked(stack) if r["seq"] not in before]) < 4 and time.monotonic() < deadline:
        time.sleep(0.1)
    shapes = [(r["method"], r["url"], (r["body"] or {}).get("text", "")) for r in new]
    assert (("CONNECT", target, "") in shapes and ("CONNECT", target, "GET /?q=pregnant HTTP/1.1\r\nHost: x") in shapes
            and any(m == "PRI" and url == f"http://{target}" for m, url, _ in shapes)), shapes
    (bad,) = [r for r in new if r["url"] == f"http://shop.test@{target}/?q=divorced"]
    assert bad["host"] == OUTSIDE and "answered 400" in bad["reason"] and bad["body"]["text"] == userinfo.decode()
    assert all(r["reason"].startswith(("tunnel refused", "request refused")) for r in new)
    assert not [r for r in iter_records(stack.session_dir) if r.record["kind"] == "request" and r.record["method"] == "PRI"]


def sent_then_closed(stack: Stack, *parts: bytes, tls_to: str | None = None) -> None:
    """Send `parts` to the proxy, each after its answer to the one before (the CONNECT's 200), in TLS to
    `tls_to` after the first when given; then close our side and read until the proxy closes its own."""
    with socket.create_connection(proxy_address(stack), timeout=10) as sock:
        sock.sendall(parts[0])
        if len(parts) > 1 or tls_to:
            assert read_head(sock).startswith(b"HTTP/1.1 200")
        if tls_to:
            context = ssl.create_default_context()
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
            with context.wrap_socket(sock, server_hostname=tls_to):
                pass
            return
        for part in parts[1:]:
            sock.sendall(part)
        sock.shutdown(socket.SHUT_WR)
        while sock.recv(65536):
            pass


def test_every_refused_shape_is_one_egress_blocked_record(stack, outside):
    """Bytes in a tunnel to one of our names that mitmproxy takes for HTTP (a word and a space first) or
    for raw TCP, to any port; a scheme it does not speak; Transfer-Encoding with Content-Length; a chunk
    size that is none: nothing reaches the listener, and each is exactly one egress_blocked record with
    what the client sent. A tunnel to our names with nothing in it, or only TLS, is a browser's spare:
    none."""
    port = outside.server_address[1]
    target = f"{OUTSIDE}:{port}"
    connect = "CONNECT {0} HTTP/1.1\r\nHost: {0}\r\n\r\n".format
    before = {r["seq"] for r in blocked(stack)}
    for where in ("127.0.0.2.test:9999", "shop.test:443"):   # spares: not attempts
        sent_then_closed(stack, connect(where).encode())
        sent_then_closed(stack, connect(where).encode(), tls_to=where.partition(":")[0])
    expected = []   # (method, url, host, body) of each attempt's one record
    for i, where in enumerate(("127.0.0.2.test:9999", "foo.test:80", "shop.test:443", "shop.test:9999")):
        # raw TCP; text mitmproxy reads as a request line with no end of head; one it answers 400 to
        for raw in (f"\x00SECRET {i} raw", f"SECRET {i} line\r\n", f"SECRET {i} head\r\n\r\n"):
            sent_then_closed(stack, connect(where).encode(), raw.encode())
            expected.append(("CONNECT", where, where.rpartition(":")[0], raw))
    sent_then_closed(stack, f"GET ftp://{target}/ftp HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    expected.append(("GET", f"ftp://{target}/ftp", OUTSIDE, ""))
    for host, url in ((OUTSIDE, f"http://{target}/"), ("shop.test", "http://shop.test/")):
        head = f"POST {url}{{}} HTTP/1.1\r\nHost: {url.split('/')[2]}\r\nTransfer-Encoding: chunked\r\n"
        sent_then_closed(stack, (head.format("smuggle") + "Content-Length: 6\r\n\r\n6\r\nSECRET\r\n0\r\n\r\n").encode())
        sent_then_closed(stack, (head.format("chunk") + "\r\nzz\r\nSECRET\r\n0\r\n\r\n").encode())
        expected += [("POST", url + "smuggle", host, "6\r\nSECRET\r\n0\r\n\r\n"),
                     ("POST", url + "chunk", host, "zz\r\nSECRET\r\n0\r\n\r\n")]
    with outside.lock:
        assert (outside.connections, bytes(outside.received)) == (0, b"")
    deadline = time.monotonic() + 30   # the tunnels' are written once the proxy has seen their clients go
    while len(new := [r for r in blocked(stack) if r["seq"] not in before]) < len(expected) and \
            time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)   # and no more come
    new = [r for r in blocked(stack) if r["seq"] not in before]
    shapes = sorted((r["method"], r["url"], r["host"], (r["body"] or {}).get("text", "")) for r in new)
    assert shapes == sorted(expected)
    assert all(r["reason"].startswith(("tunnel refused", "connect refused", "request refused")) for r in new)
    smuggled = [r for r in new if r["url"].endswith("smuggle")]
    assert all(["Transfer-Encoding", "chunked"] in r["headers"] and "request smuggling" in r["reason"]
               for r in smuggled)


def test_hostile_bytes_in_our_own_traffic_are_captured_and_answered(stack):
    before = len(list(iter_records(stack.session_dir)))   # the module's stack: earlier tests wrote the rest
    head = tls_request(stack, "shop.test:443", "shop.test", b"GET /s?k=\xff\xfekettle HTTP/1.1\r\nHost: shop.test\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400") and b"waitress" in head, head  # our origin answered it
    for body in (b'{"t":"field","value":"divorced \\ud800"}', b'{"t":"x","a":' + b"[" * 50000 + b"]" * 50000 + b"}"):
        request = (b"POST http://metrics.test/collect HTTP/1.1\r\nHost: metrics.test\r\n"
                   b"Content-Type: text/plain\r\nContent-Length: %d\r\n\r\n" % len(body)) + body
        assert b"Server: waitress" in raw_exchange(stack, request), body[:40]  # our tracker answered
    records = [line.record for line in iter_records(stack.session_dir)][before:]
    urls = {r["url"] for r in records if r["kind"] == "request"}
    assert "https://shop.test/s?k=%FF%FEkettle" in urls
    answered = {r["request"] for r in records if r["kind"] == "response"}
    requests = [r["seq"] for r in records if r["kind"] == "request"]
    assert set(requests[-3:]) <= answered, "every hostile request has its response record"
    beacons = [r for r in records if r["kind"] == "beacon"][-2:]
    assert beacons[0]["data"] == {"t": "field", "value": "divorced \ufffd"}
    assert beacons[1]["data"] is None
    assert not [r for r in records if r["kind"] == "error"]
    assert "Addon error" not in (stack.session_dir / "proxy.log").read_text()


def test_the_log_of_all_that_verifies_signed(stack, outside):
    # runs last in this module: the stack is still up, so the log is not sealed yet
    result = verify(stack.session_dir)
    assert result.damage == "truncated" and result.count > 20
    assert fingerprint(raw_public(stack.signing_key)) == stack.key_fingerprint


def test_mitmproxy_features_a_config_file_turns_on_do_not_touch_the_traffic(tmp_path, catalog_file, outside):
    """The proxy reads ~/.mitmproxy/config.yaml, which is the CA folder's: options set there that would
    rewrite requests (modify_headers, map_remote, anticache) or save flows find none of those addons in
    the chain once it runs (addons/lean.py). What the agent sent is what is recorded and what the origin
    gets."""
    home = tmp_path / "home"
    ca = ensure_ca(home / "ca")
    saved = tmp_path / "flows.mitm"
    (ca.confdir / "config.yaml").write_text(
        "modify_headers: ['/~q/X-Injected/yes']\n"
        f"map_remote: ['|//shop.test/|//{OUTSIDE}:{outside.server_address[1]}/']\n"
        f"anticache: true\nsave_stream_file: {saved}\n", encoding="utf-8")
    session = tmp_path / "session"
    session.mkdir()
    before = len(outside.received)
    with Stack(session, ca, load_or_create_key(home), catalog=catalog_file, log=lambda m: None) as running:
        head = raw_exchange(running, b"GET http://shop.test/ HTTP/1.1\r\nHost: shop.test\r\nIf-None-Match: x\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"Server: waitress" in head, head   # our origin, not the listener
    (request,) = [r for r in (line.record for line in iter_records(session)) if r["kind"] == "request"]
    assert request["headers"] == [["Host", "shop.test"], ["If-None-Match", "x"]]
    assert len(outside.received) == before
    assert not saved.exists() or saved.stat().st_size == 0   # opened when configured, never written
