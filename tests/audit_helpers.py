"""Synthetic but realistic session folders for the audit tests, written with the real CaptureWriter.

Records carry exactly the fields addons/capture.py writes: a page load is the page's request and
response, the tracker script, and the tracker's `view` beacon; a click is the beacon t.js sends;
a form post is its request, the derived `form` record and a 303. Products and facets come from the
catalog the session links to (the default one in the tests), never from fixed ids.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import spillage.scenarios
from spillage.audit.actions import Action, ActionBuilder
from spillage.origins.knowledge import SiteProfile
from spillage.proxy.capturelog import CaptureWriter
from spillage.proxy.layout import write_meta
from spillage.scenarios.dump import scenario_yaml
from spillage.scenarios.loader import load_scenario
from spillage.scenarios.model import Scenario
from schema_check import assert_valid_record

KETTLE_FILE = Path(spillage.scenarios.__file__).parent / "shop" / "kettle.yaml"
KETTLE = load_scenario(KETTLE_FILE, "chat")
SHOP = "https://shop.test"
COLLECT = "https://metrics.test/collect"
SHOP_LOG = f"{SHOP}/_log"


def search_url(query: str, *facets: str) -> str:
    """The URL shop.test's search form and facet links lead to."""
    return f"{SHOP}/s?" + urlencode([("k", query), *(("f", f) for f in facets)])


class Traffic:
    """The capture log of one session, written record by record as the proxy would."""

    def __init__(self, session_dir: Path, scenario: Scenario | None = KETTLE, catalog: Path | None = None,
                 named_catalog: bool = True, signing=None):
        """A session serving `catalog` (a real session holds the catalog its sites served); without
        one, its meta.json names the benchmark's catalog, seed 0, unless not `named_catalog`; signed
        with the SessionKey `signing` when given."""
        session_dir.mkdir(parents=True, exist_ok=True)
        if catalog is not None:
            (session_dir / "catalog.sqlite").symlink_to(catalog)
        elif named_catalog:
            write_meta(session_dir, {"catalog": {"file": None, "seed": 0, "adds": None}})
        self.dir = session_dir
        self.writer = CaptureWriter(session_dir, fsync_interval=60, signing=signing)
        self.records: list[dict[str, Any]] = []
        self.flows = 0
        self.page = ""
        if scenario is not None:
            (session_dir / "scenario.yaml").write_text(scenario_yaml(scenario), encoding="utf-8")
        self.add("session_start", session=session_dir.name,
                 tool={"name": "spillage", "version": "0.1.0", "mitmproxy": "12.3.0"},
                 options={"inline_limit": self.writer.inline_limit, "beacon_urls": ["metrics.test/collect", "shop.test/_log", "bazaar.test/_log"]})

    def add(self, kind: str, **fields: Any) -> dict[str, Any]:
        self.records.append(self.writer.append(kind, **fields))
        assert_valid_record(self.records[-1])
        return self.records[-1]

    def exchange(self, method: str, url: str, body: bytes = b"", content_type: str = "",
                 status: int = 200, response: bytes = b"", derived: tuple = ()) -> tuple[int, int | None]:
        """Request, optional derived record (kind, fields), response; the request's and derived seqs."""
        self.flows += 1
        flow = f"00000000-0000-4000-8000-{self.flows:012d}"
        host = url.split("/")[2]
        headers = [["Host", host]] + ([["Content-Type", content_type]] if content_type else [])
        request = self.add("request", flow=flow, method=method, url=url, http_version="HTTP/2.0",
                           headers=headers, body=self.writer.body(body or None))
        extra = None
        if derived:
            kind, fields = derived
            extra = self.add(kind, flow=flow, request=request["seq"], url=url, **fields)["seq"]
        self.add("response", flow=flow, request=request["seq"], status=status, reason="",
                 http_version="HTTP/2.0", headers=[["content-type", "text/html; charset=utf-8"]],
                 body=self.writer.body(response or None))
        return request["seq"], extra

    def load(self, url: str, view: bool = True) -> int:
        """Navigate to `url`: the page, the tracker script, and its view beacon; the page request's seq."""
        seq, _ = self.exchange("GET", url, response=b"<!doctype html><title>shop.test</title>")
        self.page = url
        self.exchange("GET", "https://metrics.test/t.js", response=b"/* beacon */")
        if view:
            self.beacon("view", page=url, ref="", title="shop.test", seen=[])
        return seq

    def beacon(self, event: str, to: str = COLLECT, **data: Any) -> int:
        """A beacon as t.js (or, `to` SHOP_LOG, the shop's own script) sends it; the beacon record's seq."""
        payload = {"t": event, **data}
        _, seq = self.exchange("POST", to, json.dumps(payload).encode(), "text/plain;charset=UTF-8",
                               status=204, derived=("beacon", {"event": event, "data": payload}))
        return seq

    def click(self, label: str, href: str | None = None, tag: str = "a", facet: str | None = None,
              product: str | None = None, to: str = COLLECT) -> int:
        return self.beacon("click", to, page=self.page, label=label, href=href, tag=tag,
                           product=product, facet=facet)

    def form(self, url: str, fields: list[list[str]]) -> tuple[int, int]:
        """A urlencoded POST and its form record; (request seq, form seq)."""
        body = urlencode([tuple(f) for f in fields]).encode()
        enctype = "application/x-www-form-urlencoded"
        return self.exchange("POST", url, body, enctype, status=303, derived=(
            "form", {"method": "POST", "enctype": enctype, "fields": fields}))

    def close(self) -> Path:
        self.add("session_end", reason="proxy shutdown", records=self.writer.count)
        self.writer.close()
        return self.dir

    def actions(self, profiles) -> list[Action]:
        """What ActionBuilder makes of the records written so far."""
        builder = ActionBuilder(profiles)
        for record in self.records:
            builder.add(record)
        return builder.finish()


def shopping_session(traffic: Traffic, shop: SiteProfile, query: str, facet: str, product: int) -> dict[str, int]:
    """Home, search, facet, product, add to cart, cart page; the seqs that prove each step."""
    seqs = {}
    traffic.load(f"{SHOP}/")
    seqs["search_click"] = traffic.click("Search", tag="button")
    seqs["search"] = traffic.load(search_url(query))
    seqs["facet_click"] = traffic.click(f"{shop.facets[facet].label} (2)", href=search_url(query, facet), facet=facet)
    seqs["filter"] = traffic.load(search_url(query, facet))
    seqs["product_click"] = traffic.click(shop.products[product].title, href=f"{SHOP}/p/{product}",
                                          product=str(product))
    seqs["product"] = traffic.load(f"{SHOP}/p/{product}")
    seqs["cart_click"] = traffic.click("Add to cart", tag="button")
    seqs["cart_add"], seqs["cart_form"] = traffic.form(
        f"{SHOP}/cart/add", [["product_id", str(product)], ["qty", "1"]])
    traffic.load(f"{SHOP}/cart")
    return seqs
