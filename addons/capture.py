"""Write every request, response, beacon, form submission and refusal into the capture log."""

import logging
import os
import sys
from pathlib import Path

from mitmproxy import ctx
from mitmproxy import http
from mitmproxy import tls
from mitmproxy import version as mitmproxy_version

from spillage.addons.failclosed import FAILED_KEY
from spillage.addons.failclosed import SEQ_KEY
from spillage.addons.failclosed import fail_closed
from spillage.addons.guardnote import DERIVED_KEY
from spillage.addons.guardnote import GUARD_KEY
from spillage.addons.guardnote import request_sha256
from spillage.addons.options import BEACON_URLS
from spillage.addons.options import CHECKPOINT_EVERY
from spillage.addons.options import INLINE_LIMIT
from spillage.addons.options import SESSION
from spillage.addons.options import SIGNER_FD
from spillage.addons.options import declare
from spillage.proxy.capturelog import CHECKPOINT_PREFIX
from spillage.proxy.capturelog import SEALED_PREFIX
from spillage.proxy.capturelog import CaptureWriter
from spillage.proxy.capturelog import canonical_json
from spillage.proxy.beacons import DEFAULT_BEACON_URLS
from spillage.proxy.beacons import endpoints
from spillage.proxy.formats.flowrecords import request_url
from spillage.proxy.formats.flowrecords import derive
from spillage.proxy.formats.flowrecords import write_refusal
from spillage.proxy.formats.flowrecords import write_request_record
from spillage.proxy.formats.flowrecords import write_response
from spillage.proxy.reading.records import clean_text
from spillage.proxy.refusal import EGRESS_KEY
from spillage.proxy.refusal import SENT_KEY
from spillage.proxy.signing import SessionKey
from spillage.proxy.version import SPILLAGE_VERSION

#: What the proxy prints on stdout after each checkpoint, for the runner (runner/heads.py).

logger = logging.getLogger(__name__)


def read_session_key(fd: int) -> SessionKey:
    """The session key the runner wrote to the pipe `fd` (read whole, then closed)."""
    with os.fdopen(fd, "r", encoding="utf-8") as pipe:
        return SessionKey.from_json(pipe.read())


def report_checkpoint(record: dict, final: bool) -> None:
    """Tell the runner the signed head, one line on stdout: a channel the agent cannot write. A runner
    that is gone (a closed pipe) does not stop the capture: the log on disk is the evidence."""
    prefix = SEALED_PREFIX if final else CHECKPOINT_PREFIX
    try:
        sys.stdout.write(prefix + canonical_json(record).decode("utf-8") + "\n")
        sys.stdout.flush()
    except OSError as e:
        logger.warning(f"spillage: cannot report the signed head to the runner ({e}); capture goes on")


class Capture:
    """Own the capture log of one session: one writer, records in the order the proxy sees them."""

    def __init__(self) -> None:
        self.writer: CaptureWriter | None = None
        self.beacon_endpoints = endpoints(DEFAULT_BEACON_URLS)

    def load(self, loader):
        declare(loader, SESSION, INLINE_LIMIT, BEACON_URLS, SIGNER_FD, CHECKPOINT_EVERY)

    def configure(self, updated):
        if BEACON_URLS.name in updated:  # kept here: mitmproxy copies a list option on every read
            self.beacon_endpoints = endpoints(ctx.options.spillage_beacon_urls)
        if SESSION.name in updated and ctx.options.spillage_session:
            self.close("session changed")
            fd = ctx.options.spillage_signer_fd
            self.writer = CaptureWriter(
                Path(ctx.options.spillage_session),
                inline_limit=ctx.options.spillage_inline_limit,
                signing=read_session_key(fd) if fd >= 0 else None,
                checkpoint_every=ctx.options.spillage_checkpoint_every,
                on_checkpoint=report_checkpoint,
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
                "live": list(ctx.options.spillage_live),
                **({"live_map": ctx.options.spillage_live_map} if ctx.options.spillage_live_map else {}),
                "signed": self.writer.signed,
            },
        )

    @fail_closed
    def http_connect(self, flow: http.HTTPFlow) -> None:
        refusal = flow.metadata.get(EGRESS_KEY)
        if refusal:
            self.write_refusal(flow, refusal, url=f"{flow.request.host}:{flow.request.port}")

    @fail_closed
    def request(self, flow: http.HTTPFlow) -> None:
        refusal = flow.metadata.get(EGRESS_KEY)
        if refusal:
            self.write_refusal(flow, refusal, url=flow.request.pretty_url)
            return
        if FAILED_KEY in flow.metadata:
            return
        guarded = flow.metadata.get(GUARD_KEY)
        record = None
        if not (guarded and guarded["enforced"] and flow.response):  # a request the guard answered was not sent
            url = request_url(flow.request)
            record = write_request_record(self.write, self.body, flow.id, flow.request, url)
            if record is not None:
                flow.metadata[SEQ_KEY] = record["seq"]
                derive(self.write, flow.id, record["seq"], flow.request, url, self.beacon_endpoints,
                       flow.metadata.get(DERIVED_KEY))
        if guarded:
            self.write_guard(flow, guarded, record)

    @fail_closed
    def response(self, flow: http.HTTPFlow) -> None:
        if EGRESS_KEY in flow.metadata or SEQ_KEY not in flow.metadata:
            return
        write_response(self.write, self.body, flow.id, flow.metadata[SEQ_KEY], flow.response)

    @fail_closed
    def error(self, flow: http.HTTPFlow) -> None:
        """The error; first the refusal of a request mitmproxy failed before `request` (addons/egress.py),
        with the bytes its client sent after its head."""
        refusal = flow.metadata.get(EGRESS_KEY)
        if refusal and flow.request.timestamp_end is None and flow.request.method != "CONNECT":
            self.write_refusal(flow, refusal, url=flow.request.pretty_url, content=flow.metadata.get(SENT_KEY))
        message = flow.error.msg if flow.error else "unknown error"
        self.write("error", flow=flow.id, request=flow.metadata.get(SEQ_KEY), message=clean_text(message))

    def tls_failed_client(self, data: tls.TlsData) -> None:
        sni = clean_text(data.conn.sni or "?")
        self.write("error", flow=None, request=None,
                   message=clean_text(f"client TLS handshake failed for {sni}: {data.conn.error}"))

    def done(self):
        self.close("proxy shutdown")

    def write_guard(self, flow: http.HTTPFlow, guarded: dict, sent: dict | None) -> None:
        """Record what the guard decided, with the request as the agent sent it (kept in this log only)
        and hashes of it and of what was sent (None when nothing was)."""
        decision, original = guarded["decision"], guarded["original"]
        self.write(
            "guard", flow=flow.id, request=sent["seq"] if sent else None, mode=ctx.options.spillage_guard,
            action=decision.action, enforced=guarded["enforced"], observer=decision.observer, rule=decision.rule,
            findings=[f.as_json() for f in decision.findings],
            original={"method": original["method"], "url": original["url"], "http_version": original["http_version"],
                      "headers": original["headers"], "body": self.body(original["content"])},
            original_sha256=original["sha256"], sent_sha256=request_sha256(flow.request) if sent else None)

    def write_refusal(self, flow: http.HTTPFlow, refusal: dict, url: str, content: bytes | None = None) -> None:
        """Record a refused request or tunnel, keeping everything the client sent (`content`: its body as
        sent, when mitmproxy never read it)."""
        write_refusal(self.write, self.body, flow.id, flow.request, url, refusal, content)

    def write_blocked(self, flow_id: str, method: str, url: str, host: str, port: int, data: bytes,
                      refusal: dict) -> None:
        """Record a refused connection that carried no HTTP request (raw TCP, an unrouted name)."""
        self.write("egress_blocked", flow=flow_id, method=method, url=clean_text(url),
                   host=clean_text(host), port=port, background=refusal["background"], headers=[],
                   body=self.body(data), reason=refusal["reason"])

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
        """Seal the log with `session_end` (and its final signed checkpoint) and close it."""
        if self.writer is None:
            return
        self.write("session_end", reason=reason, records=self.writer.count)
        if self.writer:
            self.writer.close()
        self.writer = None
