"""One WSGI callable for every origin, dispatching on the Host header."""

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


def make_app(catalog_path) -> HostDispatcher:
    catalog = Catalog(catalog_path)
    return HostDispatcher({
        "shop.test": make_shop(catalog),
        "bazaar.test": make_bazaar(catalog),
        "metrics.test": make_metrics(),
    })
