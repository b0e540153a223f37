"""The refusal contract: how the proxy answers and describes traffic it does not let through.

The live egress policy (addons/egress.py) and the capture-file readers (proxy/formats/) share it: a
refused request is answered with 403 and `REFUSED_BODY`, which is how an exported-then-imported
refusal is recognised again, and it is described by `describe_refusal`.
"""

from spillage.proxy.hosts import background_reason

REFUSED_BODY = b"spillage: egress refused; only *.test hosts are reachable through this proxy\n"

#: flow.metadata key under which a refusal is described for the capture addon.
EGRESS_KEY = "spillage.egress"

#: flow.metadata key: what the client sent after the head of its connection's first HTTP/1 request, as
#: the proxy first read it (addons/connection_guard.py), the body of a request mitmproxy fails unread.
SENT_KEY = "spillage.sent"

#: Said in the reason of a request mitmproxy failed before it was whole (its framing, its scheme): such a
#: request can only be sent again as it was written (runner/replay.py), headers and body as recorded.
UNWHOLE = "mitmproxy failed it before it was whole"


def describe_refusal(host: str, path: str | None, stage: str) -> dict:
    """{background, reason} for refusing `host` at `stage` (connect, request, tcp, ...): whether it is
    the browser's own background traffic; `path` (with its query) tells a search engine's results page
    from the engine's other pages, and is None where only the host is known (a tunnel)."""
    reason = background_reason(host, path)
    what = f"browser background ({reason})" if reason else "not a .test host"
    return {"background": reason is not None, "reason": f"{stage} refused: {what}"}
