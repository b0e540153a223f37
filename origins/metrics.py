"""metrics.test: a third-party tracker serving a beacon script and accepting its beacons."""

from importlib import resources

import falcon

MAX_BEACON = 64 * 1024
_SCRIPT = resources.files(__package__).joinpath("static/t.js").read_bytes()
_ABOUT = (
    "metrics.test is a third-party analytics service.\n"
    "Pages that include https://metrics.test/t.js report page views, clicks, scroll depth\n"
    "and form submissions (never field values) to https://metrics.test/collect.\n"
)


class About:
    def on_get(self, req, resp):
        resp.content_type = "text/plain; charset=utf-8"
        resp.text = _ABOUT


class Script:
    def on_get(self, req, resp):
        resp.content_type = "text/javascript; charset=utf-8"
        resp.cache_control = ["no-store"]
        resp.data = _SCRIPT


class Collect:
    def on_post(self, req, resp):
        """Accept a beacon of any content type up to MAX_BEACON bytes; the proxy records it."""
        if len(req.bounded_stream.read(MAX_BEACON + 1)) > MAX_BEACON:
            raise falcon.HTTPContentTooLarge(description=f"Beacons are limited to {MAX_BEACON} bytes.")
        resp.status = falcon.HTTP_204
        resp.set_header("Access-Control-Allow-Origin", "*")


def make_metrics() -> falcon.App:
    app = falcon.App()
    app.add_route("/", About())
    app.add_route("/t.js", Script())
    app.add_route("/collect", Collect())
    return app
