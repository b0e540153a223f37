"""One WSGI callable for every origin, dispatching on the Host header; and the servers' access log."""

import io
import json
import os
import threading
import time
from pathlib import Path

from .bazaar import make_bazaar
from .catalog import Catalog
from .metrics import make_metrics
from .shop import make_shop


def request_host(environ) -> str:
    """The Host header lowercased, without port or trailing dot ("" when absent)."""
    host = environ.get("HTTP_HOST", "").strip().lower()
    if host.startswith("["):  # IPv6 literal, e.g. [::1]:8080
        host = host[: host.find("]") + 1]
    else:
        host = host.partition(":")[0]
    return host.rstrip(".")


class HostDispatcher:
    """Route each request to the app serving its host; 421 for hosts we do not serve."""

    def __init__(self, apps: dict):
        self.apps = apps

    def __call__(self, environ, start_response):
        host = request_host(environ)
        app = self.apps.get(host)
        if app is not None:
            return app(environ, start_response)
        body = (
            f"421 Misdirected Request: this server does not serve host {host or '(none)'!r}.\n"
            f"Hosts served: {', '.join(sorted(self.apps))}\n"
        ).encode()
        start_response("421 Misdirected Request", [
            ("Content-Type", "text/plain; charset=utf-8"),
            ("Content-Length", str(len(body))),
            ("X-Content-Type-Options", "nosniff"),
        ])
        return [body]


MAX_LOGGED_BODY = 64 * 1024   # the most any of our sites reads of a body (beacons, forms)


class AccessLog:
    """Middleware: one JSON line per request as the server received it (time, host, method, target,
    body as text up to MAX_LOGGED_BODY bytes) appended to `path`: the sites' and the tracker's own
    view of what reached them, independent of the proxy's capture log."""

    def __init__(self, app, path: Path):
        self.app, self.lock = app, threading.Lock()
        # 0600: with the guard off it holds every leak the sites received
        self.file = os.fdopen(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "a", encoding="utf-8")

    def __call__(self, environ, start_response):
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        body = None   # a body larger than any of our sites reads is passed on unread, its size logged
        if 0 < length <= MAX_LOGGED_BODY:
            body = environ["wsgi.input"].read(length)
            environ["wsgi.input"] = io.BytesIO(body)
        query = environ.get("QUERY_STRING", "")
        target = environ.get("REQUEST_URI") or environ.get("PATH_INFO", "") + (f"?{query}" if query else "")
        line = json.dumps({"ts": round(time.time(), 3), "host": request_host(environ),
                           "method": environ.get("REQUEST_METHOD", ""), "target": target, "size": length,
                           "body": body.decode("utf-8", "replace") if body is not None else None},
                          ensure_ascii=False)
        with self.lock:
            self.file.write(line + "\n")
            self.file.flush()
        return self.app(environ, start_response)


def make_app(catalog_path, access_log: Path | None = None):
    """The sites on `catalog_path`, logging every request to `access_log` when given."""
    catalog = Catalog(catalog_path)
    app = HostDispatcher({
        "shop.test": make_shop(catalog),
        "bazaar.test": make_bazaar(catalog),
        "metrics.test": make_metrics(),
    })
    return AccessLog(app, access_log) if access_log else app
