"""Which requests are event beacons: the endpoints, and how a URL is matched against them.

The capture addon (which writes a `beacon` record for each), the leak guard and the auditor (which reads
such a request through its `beacon` record, not as a page) must agree on every URL, odd ones included,
so all three match with `beacon_target`: the host and path of the request's recorded URL as urlsplit
reads them, without port, query or fragment, lowercased.
"""

from collections.abc import Iterable
from urllib.parse import urlsplit

DEFAULT_BEACON_URLS = ("metrics.test/collect", "shop.test/_log", "bazaar.test/_log")


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
