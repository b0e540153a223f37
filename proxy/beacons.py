"""Which requests are event beacons: the endpoints, and how a URL is matched against them.

The capture addon (which writes a `beacon` record for each), the leak guard and the auditor (which reads
such a request through its `beacon` record, not as a page) must agree on every URL, odd ones included,
so all three match with `beacon_target`: the host and path of the request's recorded URL as urlsplit
reads them, without port, query or fragment, lowercased.
"""

import re
from collections.abc import Iterable
from functools import lru_cache
from urllib.parse import urlsplit

DEFAULT_BEACON_URLS = ("metrics.test/collect", "shop.test/_log", "bazaar.test/_log")

# The events' fields (docs/TRACKING.md), by the role each plays: what the agent typed, a URL of the
# page or a link, and what the site showed or the event is (its name, ids, labels, times).
TYPED, URL, SITE = "typed", "url", "site"
_COMMON = {"t": SITE, "type": SITE, "event": SITE, "cid": SITE, "sid": SITE, "page": URL, "ref": URL}
BEACON_FIELDS: dict[str, dict[str, str]] = {
    "view": {"title": SITE, "seen[]": SITE},
    "click": {"label": SITE, "href": URL, "tag": SITE, "product": SITE, "facet": SITE, "section": SITE},
    "scroll": {"depth": SITE, "seen[]": SITE},
    "impression": {"items[]": SITE, "items[].kind": SITE, "items[].id": SITE, "items[].ms": SITE,
                   "items[].sponsored": SITE, "products[]": SITE},
    "field": {"action": SITE, "form": URL, "name": SITE, "type": SITE, "label": SITE, "value": TYPED},
    "keys": {"name": SITE, "entries[]": SITE, "entries[].value": TYPED, "entries[].ms": SITE},
    "submit": {"action": URL, "method": SITE, "fields[]": SITE, "fields[][]": TYPED},
}
_INDEX = re.compile(r"\[\d+\]")


@lru_cache(maxsize=4096)
def beacon_field_role(event: str, path: str) -> str | None:
    """The role (TYPED, URL, SITE) of the field at JSON `path` (`$.items[3].id`) of an `event`'s
    payload, or None for a field the event does not have (a `submit`'s field names are SITE, its
    values TYPED)."""
    key = _INDEX.sub("[]", path.removeprefix("$."))
    if event == "submit" and re.fullmatch(r"fields\[\]\[\]", key):
        return TYPED if path.endswith("[1]") else SITE
    fields = BEACON_FIELDS.get(event, {})
    if key in fields or key in _COMMON:
        return fields.get(key) or _COMMON[key]
    return SITE if any(f.startswith((key + "[", key + ".")) for f in fields) else None   # a list or object of them


def beacon_target(url: str) -> str:
    """`host/path` of `url`, lowercased, as it is compared with the beacon endpoints ("" for a URL that
    urlsplit refuses, such as an unclosed IPv6 bracket: it is no endpoint of ours)."""
    try:
        parts = urlsplit(url)
        return f"{parts.hostname or ''}{parts.path}".lower()
    except ValueError:
        return ""


def endpoints(beacon_urls: Iterable[str]) -> frozenset[str]:
    """The endpoints `host/path`, lowercased, to look a `beacon_target` up in."""
    return frozenset(url.lower() for url in beacon_urls)
