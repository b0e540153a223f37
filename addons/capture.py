"""Write every request, response, beacon, form submission and refusal into the capture log."""

import json
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
from spillage.proxy.version import SPILLAGE_VERSION

SEQ_KEY = "spillage.seq"
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
BEACON_EVENT_FIELDS = ("t", "type", "event")

logger = logging.getLogger(__name__)


def header_pairs(headers: http.Headers) -> list[list[str]]:
    """Headers in wire order as [name, value] pairs, bytes decoded as Latin-1."""
    return [[k.decode("latin-1"), v.decode("latin-1")] for k, v in headers.fields]


def beacon_payload(body: bytes) -> tuple[str, object]:
    """The beacon's event name and parsed JSON payload (`unknown`, None when not JSON)."""

    def reject(constant: str):
        raise ValueError(f"non-finite number {constant}")

    try:
        data = json.loads(body.decode("utf-8"), parse_constant=reject)
    except (UnicodeDecodeError, ValueError):
        return "unknown", None
    if isinstance(data, dict):
        for field in BEACON_EVENT_FIELDS:
            if isinstance(data.get(field), str):
                return data[field], data
    return "unknown", data


def form_fields(request: http.Request) -> tuple[str, list[list[str]]] | None:
    """(enctype, [[name, value], ...]) when the request body is a submitted form, else None."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type not in FORM_TYPES or not request.raw_content:
        return None
    if content_type == "multipart/form-data":
        items = request.multipart_form.items(multi=True)
        fields = [[k.decode("utf-8", "replace"), v.decode("utf-8", "replace")] for k, v in items]
    else:
        fields = [[k, v] for k, v in request.urlencoded_form.items(multi=True)]
    return content_type, fields


def is_beacon(request: http.Request) -> bool:
    """True when `request` goes to one of the tracker endpoints in `spillage_beacon_urls`."""
    target = f"{request.pretty_host.lower()}{request.path.split('?')[0]}"
    return target in {url.lower() for url in ctx.options.spillage_beacon_urls}


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
            ["metrics.test/collect", "shop.test/_log", "bazaar.test/_log"],
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
        request = flow.request
        url = request.pretty_url
        record = self.write(
            "request", flow=flow.id, method=request.method, url=url,
            http_version=request.http_version, headers=header_pairs(request.headers),
            body=self.writer.body(request.raw_content) if self.writer else None,
        )
        if record is None:
            return
        flow.metadata[SEQ_KEY] = record["seq"]
        if is_beacon(request):
            event, data = beacon_payload(request.raw_content or b"")
            self.write("beacon", flow=flow.id, request=record["seq"], url=url,
                       event=event, data=data)
        form = form_fields(request)
        if form:
            enctype, fields = form
            self.write("form", flow=flow.id, request=record["seq"], url=url,
                       method=request.method, enctype=enctype, fields=fields)

    def response(self, flow: http.HTTPFlow) -> None:
        if EGRESS_KEY in flow.metadata or SEQ_KEY not in flow.metadata:
            return
        response = flow.response
        self.write(
            "response", flow=flow.id, request=flow.metadata[SEQ_KEY],
            status=response.status_code, reason=response.reason,
            http_version=response.http_version, headers=header_pairs(response.headers),
            body=self.writer.body(response.raw_content) if self.writer else None,
        )

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
        request = flow.request
        self.write(
            "egress_blocked", flow=flow.id, method=request.method, url=url,
            host=request.pretty_host, port=request.port, background=refusal["background"],
            headers=header_pairs(request.headers),
            body=self.writer.body(request.raw_content) if self.writer else None,
            reason=refusal["reason"],
        )

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
