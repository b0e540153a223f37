"""Write every request, response, beacon, form submission and refusal into the capture log."""

import logging
from collections.abc import Sequence
from pathlib import Path

from mitmproxy import ctx
from mitmproxy import http
from mitmproxy import tls
from mitmproxy import version as mitmproxy_version

from spillage.addons.egress import EGRESS_KEY
from spillage.proxy.capturelog import DEFAULT_INLINE_LIMIT
from spillage.proxy.capturelog import CaptureWriter
from spillage.proxy.flowrecords import DEFAULT_BEACON_URLS
from spillage.proxy.flowrecords import write_refusal
from spillage.proxy.flowrecords import write_request
from spillage.proxy.flowrecords import write_response
from spillage.proxy.version import SPILLAGE_VERSION

SEQ_KEY = "spillage.seq"

logger = logging.getLogger(__name__)


class Capture:
    """Own the capture log of one session: one writer, records in the order the proxy sees them."""

    def __init__(self) -> None:
        self.writer: CaptureWriter | None = None

    def load(self, loader):
        loader.add_option(
            "spillage_session", str, "",
            "Session folder to write the capture log into (capture.jsonl, blobs/).",
        )
        loader.add_option(
            "spillage_inline_limit", int, DEFAULT_INLINE_LIMIT,
            "Bodies up to this many bytes are stored inline; larger ones go to blobs/.",
        )
        loader.add_option(
            "spillage_beacon_urls", Sequence[str],
            list(DEFAULT_BEACON_URLS),
            "host/path of event endpoints whose requests are also recorded as beacons: the "
            "third-party tracker's and the shops' own first-party event logs.",
        )

    def configure(self, updated):
        if "spillage_session" in updated and ctx.options.spillage_session:
            self.close("session changed")
            self.writer = CaptureWriter(
                Path(ctx.options.spillage_session),
                inline_limit=ctx.options.spillage_inline_limit,
            )

    def running(self):
        if self.writer is None:
            logger.warning("spillage: no spillage_session set, nothing is captured")
            return
        proxyserver = ctx.master.addons.get("proxyserver")
        listen = [f"{host}:{port}" for host, port, *_ in proxyserver.listen_addrs()]
        self.write(
            "session_start",
            session=self.writer.session_dir.name,
            tool={"name": "spillage", "version": SPILLAGE_VERSION,
                  "mitmproxy": mitmproxy_version.VERSION},
            options={
                "listen": listen,
                "origin": ctx.options.spillage_origin,
                "inline_limit": ctx.options.spillage_inline_limit,
                "beacon_urls": list(ctx.options.spillage_beacon_urls),
                "model_hosts": list(ctx.options.spillage_model_hosts),
            },
        )

    def http_connect(self, flow: http.HTTPFlow) -> None:
        refusal = flow.metadata.get(EGRESS_KEY)
        if refusal:
            self.write_refusal(flow, refusal, url=f"{flow.request.host}:{flow.request.port}")

    def request(self, flow: http.HTTPFlow) -> None:
        refusal = flow.metadata.get(EGRESS_KEY)
        if refusal:
            self.write_refusal(flow, refusal, url=flow.request.pretty_url)
            return
        record = write_request(self.write, self.body, flow.id, flow.request,
                               ctx.options.spillage_beacon_urls)
        if record is not None:
            flow.metadata[SEQ_KEY] = record["seq"]

    def response(self, flow: http.HTTPFlow) -> None:
        if EGRESS_KEY in flow.metadata or SEQ_KEY not in flow.metadata:
            return
        write_response(self.write, self.body, flow.id, flow.metadata[SEQ_KEY], flow.response)

    def error(self, flow: http.HTTPFlow) -> None:
        self.write("error", flow=flow.id, request=flow.metadata.get(SEQ_KEY),
                   message=flow.error.msg if flow.error else "unknown error")

    def tls_failed_client(self, data: tls.TlsData) -> None:
        sni = data.conn.sni or "?"
        self.write("error", flow=None, request=None,
                   message=f"client TLS handshake failed for {sni}: {data.conn.error}")

    def done(self):
        self.close("proxy shutdown")

    def write_refusal(self, flow: http.HTTPFlow, refusal: dict, url: str) -> None:
        """Record a refused request or tunnel, keeping everything the client sent."""
        write_refusal(self.write, self.body, flow.id, flow.request, url, refusal)

    def body(self, data: bytes | None) -> dict | None:
        """The body object of `data` (None while no log is open)."""
        return self.writer.body(data) if self.writer else None

    def write(self, kind: str, **fields) -> dict | None:
        """Append one record; a log that cannot be written stops the proxy rather than lose evidence."""
        if self.writer is None:
            return None
        try:
            return self.writer.append(kind, **fields)
        except OSError as e:
            logger.error(f"spillage: cannot write capture log, shutting down: {e}")
            self.writer = None
            ctx.master.shutdown()
            return None

    def close(self, reason: str) -> None:
        """Seal the log with `session_end` and close it."""
        if self.writer is None:
            return
        self.write("session_end", reason=reason, records=self.writer.count)
        if self.writer:
            self.writer.close()
        self.writer = None
