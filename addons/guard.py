"""The last line of egress: a server connection is opened only to the origin server or a named model
endpoint.

The request-level policy (egress.py) and the `*.test` routing (resolver.py) decide HTTP requests. This
guard decides connections, whatever they carry: raw TCP or UDP inside a tunnel, a `.test` name a failed
addon left unrouted, an outside host by any spelling. Anything not going to the origin's address or a
model endpoint is refused before a socket is opened or a name is looked up, and recorded as
`egress_blocked` (method CONNECT, url host:port), with the first bytes the client sent when the tunnel
carried raw data.
"""

import logging

from mitmproxy import ctx
from mitmproxy.connection import Client
from mitmproxy.proxy.layer import NextLayer
from mitmproxy.proxy.server_hooks import ServerConnectionHookData

from spillage.addons.failclosed import failure_message
from spillage.addons.failclosed import record_failure
from spillage.addons.resolver import parse_origin
from spillage.proxy.hosts import is_test_host
from spillage.proxy.hosts import normalise_host
from spillage.proxy.refusal import describe_refusal

MAX_FIRST_BYTES = 64 * 1024
logger = logging.getLogger(__name__)


class ConnectionGuard:
    """Refuse every server connection that is not to the origin or a model endpoint (see module doc)."""

    def __init__(self) -> None:
        self.first_bytes: dict[str, bytes] = {}   # client id -> what it sent before its layer was known
        self.recorded: set[str] = set()           # ids of server connections whose refusal is recorded
        self.origin: tuple[str, int] | None = None
        self.model_hosts: frozenset[str] = frozenset()

    def configure(self, updated):
        if updated & {"spillage_origin", "spillage_model_hosts"}:  # read here: a list option is copied per read
            try:
                self.origin = parse_origin(ctx.options.spillage_origin) if ctx.options.spillage_origin else None
            except ValueError:  # the resolver refuses the option; here nothing is allowed
                self.origin = None
            self.model_hosts = frozenset(ctx.options.spillage_model_hosts)

    def allowed(self, address: tuple[str, int] | None) -> bool:
        """True for the origin server's address and the named model endpoints."""
        if not address:
            return False
        host, port = address[0], address[1]
        return (host, port) == self.origin or f"{normalise_host(host)}:{port}" in self.model_hosts

    def next_layer(self, nextlayer: NextLayer) -> None:
        """Keep what a client sent into a tunnel to anywhere but the origin, until its layer is known:
        if that is raw TCP, those bytes are what the refusal records."""
        try:
            context = nextlayer.context
            if context.server.address and not self.allowed(context.server.address):
                self.first_bytes[context.client.id] = nextlayer.data_client()[:MAX_FIRST_BYTES]
        except Exception as exc:  # noqa: BLE001 - the connection hook below still refuses
            record_failure(None, None, failure_message(self, "next_layer", exc))

    def client_disconnected(self, client: Client) -> None:
        self.first_bytes.pop(client.id, None)

    def server_connect(self, data: ServerConnectionHookData) -> None:
        """Refuse the connection unless it goes to the origin or a model endpoint."""
        try:
            if self.allowed(data.server.address):
                return
            data.server.error = "spillage: egress refused: no server connection but to the origins"
            self.record(data.server.id, data.server.address, self.first_bytes.pop(data.client.id, b""))
        except Exception as exc:  # noqa: BLE001 - fail closed
            data.server.error = "spillage: egress refused: internal error"
            record_failure(None, None, failure_message(self, "server_connect", exc))

    def record(self, server_id: str, address: tuple[str, int] | None, data: bytes) -> None:
        """One `egress_blocked` record per refused server connection, with what the client had sent."""
        if server_id in self.recorded:
            return
        self.recorded.add(server_id)
        host, port = (address[0], address[1]) if address else ("?", 0)
        if is_test_host(host):
            refusal = {"background": False,
                       "reason": "connect refused: only HTTP to *.test hosts is routed to the origins"}
        else:
            refusal = describe_refusal(host, None, "connect")
        if data:
            refusal["reason"] += f"; the client sent {len(data)} bytes of another protocol (the body)"
        logger.info(f"spillage: {refusal['reason']}: {host}:{port}")
        capture = ctx.master.addons.get("capture")
        if capture is not None:
            capture.write_blocked(server_id, "CONNECT", f"{host}:{port}", host, port, data, refusal)
