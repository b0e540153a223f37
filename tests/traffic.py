"""Real traffic for evidence tests: a plain HTTP client walking both sites through the real proxy
(searches, a product and an item page, tracker beacons, forms, a refused outside search)."""

from __future__ import annotations

import http.client
import json
import re
import time
from urllib.parse import urlencode


def browse(proxy_url: str, pause: float = 1.2) -> int:
    """Walk shop.test, then (after `pause` seconds, so a timed checkpoint falls in between) bazaar.test;
    the number of requests sent."""
    address = proxy_url.removeprefix("http://")
    sent = 0

    def send(method: str, url: str, body: bytes | None = None, content_type: str | None = None) -> str:
        nonlocal sent
        connection = http.client.HTTPConnection(address, timeout=10)
        headers = {"Content-Type": content_type} if content_type else {}
        connection.request(method, url, body=body, headers=headers)
        text = connection.getresponse().read().decode("utf-8", "replace")
        connection.close()
        sent += 1
        return text

    def beacon(site: str, event: dict) -> None:
        send("POST", "http://metrics.test/collect", json.dumps({**event, "site": site}).encode(),
             "text/plain;charset=UTF-8")

    results = send("GET", "http://shop.test/s?k=gooseneck+kettle+for+a+divorced+dad")
    beacon("shop.test", {"t": "view", "url": "/s?k=gooseneck+kettle"})
    product = re.search(r'href="(/p/[^"?]+)', results).group(1)
    send("GET", f"http://shop.test{product}")
    beacon("shop.test", {"t": "click", "label": "Pregnancy safe (BPA-free)", "facet": "pregnancy-safe"})
    send("POST", "http://shop.test/cart/add", urlencode({"product_id": product.rsplit("/", 1)[-1], "qty": 1}).encode(),
         "application/x-www-form-urlencoded")
    send("GET", "http://www.google.com/search?q=kettle+laid+off+budget")
    time.sleep(pause)
    results = send("GET", "http://bazaar.test/sch/?_nkw=film+camera")
    item = re.search(r'href="(/itm/\d+)', results).group(1)
    send("GET", f"http://bazaar.test{item}")
    beacon("bazaar.test", {"t": "scroll", "depth": 60, "seen": [{"id": item, "ms": 1800}]})
    send("POST", f"http://bazaar.test{item}/ask", urlencode({"question": "Is it good for a beginner? I am pregnant"}).encode(),
         "application/x-www-form-urlencoded")
    return sent
