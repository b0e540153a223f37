"""Refuse every host that is not ours, and say whether the browser or the agent asked for it."""

from collections.abc import Sequence

from mitmproxy import ctx
from mitmproxy import http
from mitmproxy import tcp
from mitmproxy import version

from spillage.addons.hosts import background_reason
from spillage.addons.hosts import is_search_host
from spillage.addons.hosts import is_test_host
from spillage.addons.hosts import normalise_host

REFUSED_BODY = b"spillage: egress refused; only *.test hosts are reachable through this proxy\n"

# flow.metadata key under which the refusal is described for the capture addon.
EGRESS_KEY = "spillage.egress"


def refusal(flow: http.HTTPFlow, stage: str) -> dict:
    """Describe why `flow` is refused: which stage, and whether it is browser background traffic."""
    path = flow.request.path if stage == "request" else None
    reason = background_reason(flow.request.pretty_host, path)
    what = f"browser background ({reason})" if reason else "not a .test host"
    return {"background": reason is not None, "reason": f"{stage} refused: {what}"}


def refuse(flow: http.HTTPFlow, stage: str) -> None:
    """Answer `flow` with 403 and mark it for the capture log."""
    flow.metadata[EGRESS_KEY] = refusal(flow, stage)
    flow.response = http.Response.make(
        403, REFUSED_BODY,
        {"Content-Type": "text/plain; charset=utf-8", "Server": version.MITMPROXY},
    )


class EgressPolicy:
    """Nothing leaves the machine: requests to non-`.test` hosts get a 403, except to the model
    endpoints the runner names (`--model-via-proxy`), which pass and are captured.

    A tunnel (CONNECT) to an outside host is refused at once only when the host is one the browser
    contacts on its own and never a search engine (updates, sign-in, time). Any other tunnel opens
    to the proxy itself: with `connection_strategy=lazy` no upstream connection is made, TLS is
    intercepted with our CA, and the request inside is refused with its full URL, so a search the
    agent sent to an outside engine is recorded with its query. Raw TCP inside such a tunnel is
    killed before it could reach anyone."""

    def load(self, loader):
        loader.add_option(
            "spillage_model_hosts", Sequence[str], [],
            "HOST:PORT of model endpoints the agent reaches through this proxy; they are let through "
            "(and captured) so the model provider shows as an observer of its own.",
        )

    def allowed(self, host: str, port: int) -> bool:
        return is_test_host(host) or f"{normalise_host(host)}:{port}" in ctx.options.spillage_model_hosts

    def http_connect(self, flow: http.HTTPFlow) -> None:
        host = flow.request.host
        if not self.allowed(host, flow.request.port) and background_reason(host) and not is_search_host(host):
            refuse(flow, "connect")

    def request(self, flow: http.HTTPFlow) -> None:
        if flow.response or flow.error:
            return
        if not self.allowed(flow.request.pretty_host, flow.request.port):
            refuse(flow, "request")

    def tcp_start(self, flow: tcp.TCPFlow) -> None:
        server = flow.server_conn.address
        if server is None or not self.allowed(server[0], server[1]):
            flow.kill()
