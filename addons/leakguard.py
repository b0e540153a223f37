"""The guard on the wire: stop a leak of the guarded attributes before it leaves (docs/GUARD.md).

Runs after the egress policy and before capture. For each request it asks addons/guard_engine.py what the
request would reveal; then, by mode, it only records that (`monitor`), or sends a redacted copy
(`redact`, `strip`), or answers the agent itself: 403 with a page that says what may not be sent
and why (`block`), 204 for a beacon (`drop`). The decision and the request as the agent sent it go
to the capture addon in `flow.metadata[GUARD_KEY]` (addons/guardnote.py), which writes the `guard` record; what the
sites receive is the request record. The records the request as sent derives (`beacon`, `form`) go with it in
`flow.metadata[DERIVED_KEY]`, so that the capture writes them without reading the request again.
"""

import html
from pathlib import Path

from mitmproxy import ctx
from mitmproxy import exceptions
from mitmproxy import http
from mitmproxy import version

from spillage.addons.failclosed import fail_closed
from spillage.addons.guardnote import DERIVED_KEY
from spillage.addons.guardnote import GUARD_KEY
from spillage.addons.guardnote import request_sha256
from spillage.addons.guard_policy import MODES
from spillage.addons.options import GUARD_OPTIONS
from spillage.addons.options import declare
from spillage.proxy.formats.flowrecords import header_pairs
from spillage.proxy.reading.records import clean_text

PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Not sent</title></head>
<body><h1>Not sent</h1><p>{}</p>
<p><a href="javascript:history.back()" data-guard="not-sent">Go back</a></p></body></html>
"""


def snapshot(request: http.Request) -> dict:
    """The request as the agent sent it, for the local log only."""
    body = request.raw_content
    return {"method": clean_text(request.method), "url": clean_text(request.pretty_url),
            "http_version": request.http_version, "headers": header_pairs(request.headers),
            "content": body, "sha256": request_sha256(request)}


class LeakGuard:
    """Options `spillage_guard` (off, monitor, redact, block), `spillage_guard_policy` (a policy file),
    `spillage_guard_scenario` (the scenario whose irrelevant attributes are guarded) and
    `spillage_guard_catalog` (the sites' catalog, for what facets, sections and products imply)."""

    def __init__(self) -> None:
        self.guard = None   # a guard_engine.GuardEngine when the mode is not off (imported only then)

    def load(self, loader):
        declare(loader, *GUARD_OPTIONS)

    def configure(self, updated):
        if not updated & {o.name for o in GUARD_OPTIONS}:
            return
        mode = ctx.options.spillage_guard
        if mode not in MODES:
            raise exceptions.OptionsError(f"spillage_guard {mode!r}: expected one of {', '.join(MODES)}")
        self.guard = None if mode == "off" else self.build(mode)

    def build(self, mode: str):
        from spillage.addons.guard_engine import GuardEngine
        from spillage.addons.guard_policy import PolicyError
        from spillage.addons.guard_policy import policy_for
        from spillage.origins.knowledge import site_profiles
        from spillage.scenarios.loader import ScenarioError
        from spillage.scenarios.loader import load_scenario

        try:
            scenario = ctx.options.spillage_guard_scenario
            attributes = load_scenario(Path(scenario)).irrelevant if scenario else ()
            policy = policy_for(mode, ctx.options.spillage_guard_policy, attributes)
        except (PolicyError, ScenarioError) as e:
            raise exceptions.OptionsError(str(e)) from None
        catalog = ctx.options.spillage_guard_catalog
        return GuardEngine(policy, site_profiles(Path(catalog) if catalog else None),
                     ctx.options.spillage_beacon_urls)

    @fail_closed
    def response(self, flow: http.HTTPFlow) -> None:
        if self.guard is not None and flow.response is not None:
            self.guard.response(flow.request.pretty_host, header_pairs(flow.response.headers),
                                flow.response.raw_content or b"")

    @fail_closed
    def request(self, flow: http.HTTPFlow) -> None:
        if self.guard is None or flow.response or flow.error:
            return
        decision = self.guard.decide(flow.request)
        enforced = self.guard.policy.enforcing
        sent = decision.request if decision is not None and enforced and decision.request is not None else flow.request
        if (derived := self.guard.derived_of(sent)) is not None:
            flow.metadata[DERIVED_KEY] = derived
        if decision is None:
            return
        original = snapshot(flow.request)
        flow.metadata[GUARD_KEY] = {"decision": decision, "original": original, "enforced": enforced}
        if not enforced:
            return
        if decision.request is not None:
            flow.request.url, flow.request.headers, flow.request.content = (
                decision.request.url, decision.request.headers, decision.request.raw_content)
        elif decision.action == "block":
            page = PAGE.format(html.escape(decision.explanation(flow.request.pretty_host)))
            flow.response = http.Response.make(403, page.encode("utf-8"), {
                "Content-Type": "text/html; charset=utf-8", "Server": version.MITMPROXY,
                "X-Spillage-Guard": decision.rule})
        else:
            flow.response = http.Response.make(204, b"", {"Server": version.MITMPROXY,
                                                          "X-Spillage-Guard": decision.rule})
