"""Refuse every host that is not ours, and say whether the browser or the agent asked for it."""

from mitmproxy import http
from mitmproxy import version

from spillage.addons.hosts import background_reason
from spillage.addons.hosts import is_test_host

REFUSED_BODY = b"spillage: egress refused; only *.test hosts are reachable through this proxy\n"

# flow.metadata key under which the refusal is described for the capture addon.
EGRESS_KEY = "spillage.egress"


def refusal(flow: http.HTTPFlow, stage: str) -> dict:
    """Describe why `flow` is refused: which stage, and whether it is browser background traffic."""
    reason = background_reason(flow.request.pretty_host)
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
    """Nothing leaves the machine: CONNECT and plain requests to non-`.test` hosts get a 403."""

    def http_connect(self, flow: http.HTTPFlow) -> None:
        if not is_test_host(flow.request.host):
            refuse(flow, "connect")

    def request(self, flow: http.HTTPFlow) -> None:
        if flow.response or flow.error:
            return
        if not is_test_host(flow.request.pretty_host):
            refuse(flow, "request")
