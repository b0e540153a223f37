"""Refuse every host that is not ours, and say whether the browser or the agent asked for it."""


from mitmproxy import ctx
from mitmproxy import exceptions
from mitmproxy import http
from mitmproxy import version

from spillage.addons.failclosed import fail_closed
from spillage.addons.options import LIVE
from spillage.addons.options import MODEL_HOSTS
from spillage.addons.options import declare
from spillage.proxy.hosts import background_reason
from spillage.proxy.hosts import is_search_host
from spillage.proxy.hosts import is_test_host
from spillage.proxy.hosts import normalise_host
from spillage.proxy.live import LiveError
from spillage.proxy.live import is_live
from spillage.proxy.live import parse_live
from spillage.proxy.refusal import EGRESS_KEY
from spillage.proxy.refusal import REFUSED_BODY
from spillage.proxy.refusal import UNWHOLE
from spillage.proxy.refusal import describe_refusal

#: mitmproxy 12's words for a request whose client went before it was whole (h11, HTTP/1, HTTP/2 and 3).
CLIENT_GONE = ("peer closed connection", "Client disconnected", "by client")


def refuse(flow: http.HTTPFlow, refusal: dict) -> None:
    """Answer `flow` with 403 and mark it, described by `refusal`, for the capture log."""
    flow.metadata[EGRESS_KEY] = refusal
    flow.response = http.Response.make(
        403, REFUSED_BODY,
        {"Content-Type": "text/plain; charset=utf-8", "Server": version.MITMPROXY},
    )


def host_mismatch(request: http.Request) -> str | None:
    """Why the request's target and its Host header (or :authority) name different hosts, or None.

    A request inside a tunnel to one host that names another in Host, or an absolute-form URL whose
    host is not the Host header's, is refused: the log must say where the client really sent it."""
    named = request.host_header
    if not named or request.method == "CONNECT":
        return None
    target = normalise_host(request.host)
    header = normalise_host(named.rsplit(":", 1)[0] if not named.startswith("[") else named.split("]")[0] + "]")
    if target.strip("[]") == header.strip("[]"):
        return None
    return f"request refused: Host {named!r} does not name the request's target {request.host!r}"


def sni_mismatch(flow: http.HTTPFlow) -> str | None:
    """Why a request to a live host came in TLS that named another host (SNI), or None."""
    sni = flow.client_conn.sni
    if flow.request.scheme != "https" or not sni or normalise_host(sni) == normalise_host(flow.request.host):
        return None
    return f"request refused: TLS named {sni!r}, not the request's live host {flow.request.host!r}"


class EgressPolicy:
    """Nothing leaves the machine: requests to non-`.test` hosts get a 403, except to the model
    endpoints the runner names (`--model-via-proxy`) and the live hosts it allows (`--live`,
    proxy/live.py), which pass and are captured. A request to a live host in TLS that named another
    host, or that asks to become a WebSocket (whose messages the log would not hold), is refused.

    A tunnel (CONNECT) to an outside host is refused at once only when the host is one the browser
    contacts on its own and never a search engine (updates, sign-in, time). Any other tunnel opens
    to the proxy itself: with `connection_strategy=lazy` no upstream connection is made, TLS is
    intercepted with our CA, and the request inside is refused with its full URL, so a search the
    agent sent to an outside engine is recorded with its query. Whatever else a tunnel carries (raw
    TCP, another protocol) never gets a server connection: see addons/connection_guard.py. A request
    mitmproxy fails before it is whole is refused too, to any host (`error`)."""

    def __init__(self) -> None:
        self.model_hosts: frozenset[str] = frozenset()
        self.live: tuple = ()

    def load(self, loader):
        declare(loader, MODEL_HOSTS, LIVE)

    def configure(self, updated):
        if MODEL_HOSTS.name in updated:  # kept here: mitmproxy copies a list option on every read
            self.model_hosts = frozenset(ctx.options.spillage_model_hosts)
        if LIVE.name in updated:
            self.live = live_patterns(ctx.options.spillage_live)

    def allowed(self, host: str, port: int) -> bool:
        return (is_test_host(host) or f"{normalise_host(host)}:{port}" in self.model_hosts
                or is_live(self.live, host, port))

    @fail_closed
    def http_connect(self, flow: http.HTTPFlow) -> None:
        host = flow.request.host
        if not self.allowed(host, flow.request.port) and background_reason(host) and not is_search_host(host):
            refuse(flow, describe_refusal(host, None, "connect"))

    @fail_closed
    def request(self, flow: http.HTTPFlow) -> None:
        """Refuse a request that goes elsewhere than *.test or a model endpoint; one mitmproxy has already
        failed (an HTTP/2 preface in a plain tunnel) is marked refused too, so that it is recorded as one."""
        if flow.response:
            return
        mismatch = host_mismatch(flow.request) or self.live_mismatch(flow)
        if mismatch:
            refusal = {"background": False, "reason": mismatch}
        elif not self.allowed(flow.request.pretty_host, flow.request.port):
            refusal = describe_refusal(flow.request.pretty_host, flow.request.path, "request")
        else:
            return
        if flow.error:
            flow.metadata[EGRESS_KEY] = refusal
        else:
            refuse(flow, refusal)

    @fail_closed
    def error(self, flow: http.HTTPFlow) -> None:
        """A request mitmproxy failed before it was whole (a scheme it does not speak, Transfer-Encoding
        with Content-Length, a body it cannot read) never reached `request` and was sent nowhere: it is
        marked refused, so that it is recorded as one. Not one to our own hosts that its client gave up
        on (it went before it had sent it all): nothing refused that, and its `error` record says so."""
        request = flow.request
        if request.timestamp_end is not None or request.method == "CONNECT" or EGRESS_KEY in flow.metadata:
            return   # it reached `request` (or is a tunnel), where refusals are decided
        message = flow.error.msg if flow.error else "unknown error"
        if self.allowed(request.pretty_host, request.port):
            if any(words in message for words in CLIENT_GONE):
                return
            refusal = {"background": False, "reason": "request refused"}
        else:
            refusal = describe_refusal(request.pretty_host, request.path, "request")
        refusal["reason"] += f"; {UNWHOLE} ({message})"
        flow.metadata[EGRESS_KEY] = refusal

    def live_mismatch(self, flow: http.HTTPFlow) -> str | None:
        """Why a request to a live host is refused all the same (another SNI, a WebSocket), or None."""
        if not is_live(self.live, flow.request.host, flow.request.port):
            return None
        if flow.request.headers.get("upgrade", "").lower() == "websocket":
            return "request refused: a WebSocket to a live host (its messages would not be captured)"
        return sni_mismatch(flow)


def live_patterns(values) -> tuple:
    """The `spillage_live` option's patterns; a bad one stops the proxy with what is wrong."""
    try:
        return parse_live(list(values), LIVE.name)
    except LiveError as e:
        raise exceptions.OptionsError(str(e)) from None
