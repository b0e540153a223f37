"""metrics.test: a third-party tracker serving its analytics/session-replay script and accepting its beacons."""

import secrets
from importlib import resources

import falcon

MAX_BEACON = 64 * 1024
ID_COOKIE = "mid"
ID_MAX_AGE = 365 * 24 * 3600
_SCRIPT = resources.files(__package__).joinpath("static/t.js").read_bytes()
_ABOUT = (
    "metrics.test is a third-party analytics and session-replay service.\n"
    "Pages that include https://metrics.test/t.js report to https://metrics.test/collect:\n"
    "page views, clicks, scroll depth, which products and page sections were on screen and for\n"
    "how long, focus and changes of form fields with their values (passwords masked), the\n"
    "keystrokes typed into search boxes, and form submissions with their fields.\n"
    "Visitors are recognised by a first-party cookie _mt_id on the site and by our own\n"
    "cookie mid on metrics.test (one year each). See docs/TRACKING.md.\n"
)


def identify(req, resp) -> None:
    """Give a browser without a `mid` cookie a random one (third-party, one year)."""
    if req.cookies.get(ID_COOKIE):
        return
    resp.set_cookie(ID_COOKIE, secrets.token_hex(16), max_age=ID_MAX_AGE, path="/",
                    secure=True, http_only=True, same_site="None")


class About:
    def on_get(self, req, resp):
        resp.content_type = "text/plain; charset=utf-8"
        resp.text = _ABOUT


class Script:
    def on_get(self, req, resp):
        resp.content_type = "text/javascript; charset=utf-8"
        resp.cache_control = ["no-store"]
        resp.data = _SCRIPT
        identify(req, resp)


class Collect:
    def on_post(self, req, resp):
        """Accept a beacon of any content type up to MAX_BEACON bytes; the proxy records it."""
        if len(req.bounded_stream.read(MAX_BEACON + 1)) > MAX_BEACON:
            raise falcon.HTTPContentTooLarge(description=f"Beacons are limited to {MAX_BEACON} bytes.")
        resp.status = falcon.HTTP_204
        resp.set_header("Access-Control-Allow-Origin", "*")
        identify(req, resp)


def make_metrics() -> falcon.App:
    app = falcon.App()
    app.add_route("/", About())
    app.add_route("/t.js", Script())
    app.add_route("/collect", Collect())
    return app
