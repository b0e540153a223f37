"""The last line of egress: a server connection is opened only to the origin server or a named model
endpoint, and every refused attempt is recorded, whatever its shape.

The request-level policy (egress.py) and the `*.test` routing (resolver.py) decide HTTP requests. This
guard decides connections, whatever they carry: raw TCP or UDP inside a tunnel, a `.test` name a failed
addon left unrouted, an outside host by any spelling. Anything not going to the origin's address, a
model endpoint or a live host is refused before a socket is opened or a name is looked up, and recorded
as `egress_blocked` (method CONNECT, url host:port), with the first bytes the client sent when the
tunnel carried raw data.

A live host (`--live`, proxy/live.py) is connected to only for an HTTP request the egress policy let
through; its name is resolved by the name guard (names.py: the only names the proxy ever resolves, to
public addresses only, so DNS rebinding is refused, recorded here), and TLS to it is verified as
mitmproxy does by default (never ssl_insecure): a certificate that does not verify is a refusal,
recorded.

What never became a request is recorded when its client goes: a tunnel to an outside host in which no
request was made (nothing sent, or text with no end to its head), text in a tunnel to any other host
(ours, a model endpoint, a live host) that mitmproxy took for HTTP/1 and could not read as a request
(no end to its head, or a request line it answered 400 to, such as `SECRET raw bytes\r\n`: bytes that
start with a word and a space are HTTP to mitmproxy, any others raw TCP, refused above), and bytes
mitmproxy answered with 400 itself on a plain connection (an absolute URL it cannot read, such as
`http://shop.test@127.0.0.2/`): each an `egress_blocked` record with the bytes the client had sent.
A request whose head mitmproxy read but that failed before it was whole is the egress policy's
(addons/egress.py `error`): its first bytes travel with it (`SENT_KEY`), the body it is recorded with.

Not an attempt, and not recorded: a tunnel to one of our hosts (any `*.test` name, any port: the name
is never looked up, and its requests go to the origin) in which the client sent nothing, or only a TLS
handshake, or opened HTTP/2 without a request. That is what a browser's spare or speculative
connection is; nothing in it was refused, because nothing was asked.
"""

import logging
import re
from urllib.parse import urlsplit

from mitmproxy import ctx
from mitmproxy import http
from mitmproxy import tls
from mitmproxy.connection import Client
from mitmproxy.proxy.layer import NextLayer
from mitmproxy.proxy.layers.tls import starts_like_tls_record
from mitmproxy.proxy.server_hooks import ServerConnectionHookData

from spillage.addons.egress import live_patterns
from spillage.addons.failclosed import fail_closed
from spillage.addons.failclosed import failure_message
from spillage.addons.failclosed import record_failure
from spillage.addons.names import REFUSED
from spillage.addons.options import LIVE
from spillage.addons.options import MODEL_HOSTS
from spillage.addons.options import ORIGIN
from spillage.addons.resolver import parse_origin
from spillage.proxy.hosts import is_test_host
from spillage.proxy.hosts import normalise_host
from spillage.proxy.live import is_live
from spillage.proxy.refusal import EGRESS_KEY
from spillage.proxy.refusal import SENT_KEY
from spillage.proxy.refusal import describe_refusal

MAX_FIRST_BYTES = 64 * 1024
TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")   # an HTTP method, as the capture schema takes it
logger = logging.getLogger(__name__)


class ConnectionGuard:
    """Refuse every server connection that is not to the origin or a model endpoint (see module doc)."""

    def __init__(self) -> None:
        self.first_bytes: dict[str, bytes] = {}   # client id -> what it sent before its layer was known
        self.recorded: set[str] = set()           # ids of server connections whose refusal is recorded
        self.tunnels: dict[str, tuple[str, str, int, bool]] = {}   # client id -> (flow, host, port, outside?)
        self.answered: set[str] = set()           # ids of clients that made a request, or whose refusal is recorded
        self.origin: tuple[str, int] | None = None
        self.model_hosts: frozenset[str] = frozenset()
        self.live: tuple = ()
        self.requesting: set[str] = set()          # ids of clients whose last word was a request to a live host

    def configure(self, updated):
        if updated & {ORIGIN.name, MODEL_HOSTS.name, LIVE.name}:  # a list option is copied per read
            try:
                self.origin = parse_origin(ctx.options.spillage_origin) if ctx.options.spillage_origin else None
            except ValueError:  # the resolver refuses the option; here nothing is allowed
                self.origin = None
            self.model_hosts = frozenset(ctx.options.spillage_model_hosts)
            self.live = live_patterns(ctx.options.spillage_live)

    def allowed(self, address: tuple[str, int] | None) -> bool:
        """True for the origin server's address and the named model endpoints."""
        if not address:
            return False
        host, port = address[0], address[1]
        return (host, port) == self.origin or f"{normalise_host(host)}:{port}" in self.model_hosts

    def next_layer(self, nextlayer: NextLayer) -> None:
        """Keep what a client sent first, and into a tunnel to anywhere but the origin, until its layer is
        known: if that is raw TCP, or nothing mitmproxy can read, those bytes are what the refusal records."""
        try:
            context = nextlayer.context
            outside = context.server.address and not self.allowed(context.server.address)
            if outside or context.client.id not in self.first_bytes:
                self.first_bytes[context.client.id] = nextlayer.data_client()[:MAX_FIRST_BYTES]
        except Exception as exc:  # noqa: BLE001 - the connection hook below still refuses
            record_failure(None, None, failure_message(self, "next_layer", exc))

    @fail_closed
    def http_connect(self, flow: http.HTTPFlow) -> None:
        """A tunnel the egress policy let open (to the proxy itself): one to an outside host is recorded
        when its client goes, one to any other host if it carried bytes that are no request; neither when
        a request inside it, or its refused connection, is."""
        host, port, client = flow.request.host, flow.request.port, flow.client_conn.id
        self.first_bytes.pop(client, None)   # the CONNECT itself: what the tunnel carries is kept next
        self.requesting.discard(client)
        if EGRESS_KEY in flow.metadata:   # refused as it was asked for, and recorded so
            self.answered.add(client)
            return
        outside = not is_test_host(host) and not is_live(self.live, host, port) and \
            f"{normalise_host(host)}:{port}" not in self.model_hosts
        self.tunnels[client] = (flow.id, host, port, outside)

    @fail_closed
    def requestheaders(self, flow: http.HTTPFlow) -> None:
        """A request: its client is answered. The first on a connection keeps, when it is HTTP/1, what its
        client sent after its head, the body it is recorded with if mitmproxy fails it (addons/egress.py)."""
        if flow.request.method != "CONNECT":
            self.answered.add(flow.client_conn.id)
            head, end, rest = self.first_bytes.pop(flow.client_conn.id, b"").partition(b"\r\n\r\n")
            if end and head.startswith(flow.request.data.method + b" "):
                flow.metadata[SENT_KEY] = rest

    @fail_closed
    def request(self, flow: http.HTTPFlow) -> None:
        """A request to a live host that was let through: the one thing a live host is connected for."""
        if not flow.response and not flow.error and is_live(self.live, flow.request.host, flow.request.port):
            self.requesting.add(flow.client_conn.id)

    def client_disconnected(self, client: Client) -> None:
        """Record what this client tried that never became a request, nor a refused connection."""
        self.requesting.discard(client.id)
        data = self.first_bytes.pop(client.id, b"")
        tunnel = self.tunnels.pop(client.id, None)
        if client.id in self.answered:
            self.answered.discard(client.id)
            return
        try:
            if tunnel is None:
                if data:
                    self.unreadable(client, data)
            elif tunnel[3] or (data and not starts_like_tls_record(data) and client.alpn != b"h2"):
                flow, host, port, outside = tunnel   # not outside: text mitmproxy took for HTTP/1 (module doc)
                refusal = (describe_refusal(host, None, "tunnel") if outside else
                           {"background": False, "reason": "tunnel refused: only HTTP requests pass"})
                refusal["reason"] += ("; the client sent no request in it" if not data else
                                      f"; the client sent {len(data)} bytes that are no complete request (the body)")
                self.write(flow, "CONNECT", f"{host}:{port}", host, port, data, refusal)
        except Exception as exc:  # noqa: BLE001 - nothing was let through; the failure is recorded
            record_failure(None, None, failure_message(self, "client_disconnected", exc))

    def unreadable(self, client: Client, data: bytes) -> None:
        """Record bytes mitmproxy refused before any request (it answers 400 to a request line it cannot
        read), as the request its request line names, if it names one (else as a refused connection)."""
        method, target = (data.split(b"\r\n", 1)[0].decode("latin-1").split(" ") + ["", ""])[:2]
        parts = urlsplit(target)
        try:
            host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            host = None
        if not host or not TOKEN.fullmatch(method):
            method, target, host, port = "CONNECT", "?:0", "?", 0
        refusal = describe_refusal(host, None, "request") if host != "?" else {"background": False,
                                                                            "reason": "request refused"}
        refusal["reason"] += f"; mitmproxy could not read it and answered 400 ({len(data)} bytes, the body)"
        self.write(f"client:{client.id}", method, target, host, port, data, refusal)

    def server_connect(self, data: ServerConnectionHookData) -> None:
        """Refuse the connection unless it goes to the origin, a model endpoint, or (for an HTTP request
        let through) a live host."""
        try:
            if self.allowed(data.server.address):
                return
            address, why = data.server.address, None
            if address and is_live(self.live, address[0], address[1]):
                if data.client.id in self.requesting:
                    return   # by name: the name guard resolves it (addons/names.py)
                why = "connect refused: a live host is reached by the HTTP requests let through, nothing else"
            data.server.error = f"spillage: egress {why or 'refused: no server connection but to the origins'}"
            self.record(data.server.id, address, self.first_bytes.pop(data.client.id, b""), why)
            self.answered.add(data.client.id)
        except Exception as exc:  # noqa: BLE001 - fail closed
            data.server.error = "spillage: egress refused: internal error"
            record_failure(None, None, failure_message(self, "server_connect", exc))

    def server_connect_error(self, data: ServerConnectionHookData) -> None:
        """A connection to a live host that the name guard refused (addons/names.py): recorded."""
        error = data.server.error or ""
        if error.startswith(REFUSED):
            self.record(data.server.id, data.server.address, self.first_bytes.pop(data.client.id, b""),
                        error.removeprefix(REFUSED))

    def tls_failed_server(self, data: tls.TlsData) -> None:
        """A live host whose certificate does not verify: a refused connection, recorded."""
        try:
            host = data.conn.sni or (data.conn.address or ("?",))[0]
            port = data.conn.address[1] if data.conn.address else 0
            if is_live(self.live, host, port):
                self.record(data.conn.id, (host, port), b"", f"tls refused: the certificate of the live host "
                                                                f"{host} does not verify ({data.conn.error})")
        except Exception as exc:  # noqa: BLE001 - nothing was sent over it; the failure is recorded
            record_failure(None, None, failure_message(self, "tls_failed_server", exc))

    def record(self, server_id: str, address: tuple[str, int] | None, data: bytes, why: str | None = None) -> None:
        """One `egress_blocked` record per refused server connection, with what the client had sent."""
        if server_id in self.recorded:
            return
        self.recorded.add(server_id)
        host, port = (address[0], address[1]) if address else ("?", 0)
        if why is not None:
            refusal = {"background": False, "reason": why}
        elif is_test_host(host):
            refusal = {"background": False,
                       "reason": "connect refused: only HTTP to *.test hosts is routed to the origins"}
        else:
            refusal = describe_refusal(host, None, "connect")
        if data:
            refusal["reason"] += f"; the client sent {len(data)} bytes of another protocol (the body)"
        self.write(server_id, "CONNECT", f"{host}:{port}", host, port, data, refusal)

    def write(self, flow: str, method: str, url: str, host: str, port: int, data: bytes, refusal: dict) -> None:
        logger.info(f"spillage: {refusal['reason']}: {host}:{port}")
        capture = ctx.master.addons.get("capture")
        if capture is not None:
            capture.write_blocked(flow, method, url, host, port, data, refusal)
