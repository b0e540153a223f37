"""Fail closed: an exception in one of our hooks refuses what it was handling and is recorded.

mitmproxy logs an addon's exception and carries on, which for a proxy that must keep an agent's traffic
in would mean forwarding a request no policy looked at, or losing its record. Every flow hook of our
addons is wrapped with `fail_closed`: on an exception the request is answered with 502 (it is never
forwarded), the tunnel is refused, the server connection is not made, and an `error` record says which
hook failed and why. Capture goes on.
"""

import functools
import logging

from mitmproxy import ctx
from mitmproxy import http

from spillage.proxy.refusal import EGRESS_KEY

FAILED_KEY = "spillage.failed"
SEQ_KEY = "spillage.seq"   # flow.metadata: seq of the flow's request record

logger = logging.getLogger(__name__)


def printable(text: str, limit: int = 500) -> str:
    """`text` on one line, any character UTF-8 cannot carry escaped, at most `limit` characters."""
    text = " ".join(str(text).split())
    return text.encode("utf-8", "backslashreplace").decode("utf-8")[:limit]


def failure_message(addon: object, hook: str, exc: BaseException) -> str:
    """`refused: TypeName in Addon.hook: what it said`."""
    return printable(f"refused: {type(exc).__name__} in {type(addon).__name__}.{hook}: {exc}")


def record_failure(flow_id: str | None, request_seq: int | None, message: str) -> None:
    """Write the `error` record of a failure through the capture addon (logged if there is none)."""
    logger.error(f"spillage: {message}")
    capture = ctx.master.addons.get("capture")
    if capture is not None:
        capture.write("error", flow=flow_id, request=request_seq, message=message)


def refuse_flow(flow, message: str) -> None:
    """Refuse an HTTP flow (502, never forwarded) or kill any other flow, after a failure."""
    flow.metadata[FAILED_KEY] = message
    if isinstance(flow, http.HTTPFlow):
        if SEQ_KEY not in flow.metadata:  # what was tried is recorded as a refusal, if capture runs later
            flow.metadata.setdefault(EGRESS_KEY, {"background": False, "reason": message})
        flow.response = http.Response.make(
            502, f"spillage: {message}\n".encode(), {"Content-Type": "text/plain; charset=utf-8"})
    elif flow.killable:
        flow.kill()


def fail_closed(hook):
    """Wrap a flow hook (`hook(self, flow)`) so that an exception refuses the flow and is recorded."""

    @functools.wraps(hook)
    def guarded(self, flow):
        try:
            return hook(self, flow)
        except Exception as exc:  # noqa: BLE001 - any failure must refuse, whatever it is
            message = failure_message(self, hook.__name__, exc)
            try:
                refuse_flow(flow, message)
            finally:
                record_failure(getattr(flow, "id", None), flow.metadata.get(SEQ_KEY), message)

    return guarded
