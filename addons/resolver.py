"""Serve every `*.test` host from the loopback origin server."""

from mitmproxy import ctx
from mitmproxy import exceptions
from mitmproxy import http

from spillage.addons.failclosed import fail_closed
from spillage.addons.options import ORIGIN
from spillage.addons.options import declare
from spillage.proxy.hosts import is_test_host


def parse_origin(value: str) -> tuple[str, int]:
    """Parse `127.0.0.1:8080` into (host, port); only loopback addresses are accepted."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {value!r}")
    if host not in ("127.0.0.1", "localhost", "[::1]"):
        raise ValueError(f"origin must be on loopback, got {host!r}")
    return host.strip("[]"), int(port)


class LoopbackResolver:
    """Rewrite requests for `*.test` to plain HTTP on the origin server, keeping the Host header.

    The rewrite happens in the `request` hook: the client's TLS (if any) ends at the proxy,
    and the origin sees the original host in `Host`. Together with
    `connection_strategy=lazy` no connection is ever attempted to the `.test` name itself.
    """

    def __init__(self) -> None:
        self.origin: tuple[str, int] | None = None

    def load(self, loader):
        declare(loader, ORIGIN)

    def configure(self, updated):
        if ORIGIN.name in updated:
            value = ctx.options.spillage_origin
            try:
                self.origin = parse_origin(value) if value else None
            except ValueError as e:
                raise exceptions.OptionsError(f"spillage_origin: {e}") from e

    @fail_closed
    def request(self, flow: http.HTTPFlow) -> None:
        if flow.response or flow.error or not is_test_host(flow.request.pretty_host):
            return
        if self.origin is None:
            flow.response = http.Response.make(
                502, b"spillage: no origin server configured (spillage_origin)\n",
                {"Content-Type": "text/plain; charset=utf-8"},
            )
            return
        host_header = flow.request.host_header or flow.request.pretty_host
        flow.request.scheme = "http"
        flow.request.host, flow.request.port = self.origin
        flow.request.host_header = host_header
