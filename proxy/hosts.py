"""Which hosts are ours, and which outside hosts are the browser's own background traffic."""

import re

TEST_SUFFIX = ".test"

# Hosts Chromium (or the agent framework driving it) contacts on its own, grouped by why. A refused request to one of these is
# browser background traffic, not an agent action. Patterns are full-match regexes.
BACKGROUND_HOSTS: dict[str, tuple[str, ...]] = {
    "update": (
        r"update\.googleapis\.com",
        r"(.+\.)?gvt[12]\.com",
        r"dl\.google\.com",
        r"edgedl\.me\.gvt1\.com",
        r"optimizationguide-pa\.googleapis\.com",
        r"content-autofill\.googleapis\.com",
        r"safebrowsing\.googleapis\.com",
        r"redirector\.gvt1\.com",
    ),
    "sign-in": (
        r"accounts\.google\.com",
        r"android\.clients\.google\.com",
        r"www\.googleapis\.com",
        r"oauth2\.googleapis\.com",
    ),
    "search-engine": (
        r"(www\.)?google\.com",
        r"(.+\.)?duckduckgo\.com",
        r"(www\.)?bing\.com",
    ),
    "agent-harness": (
        r"(.+\.)?browser-use\.com",
    ),
    "time": (
        r"clients[0-9]*\.google\.com",
        r"time\.google\.com",
    ),
}

# Search engines' result pages: a request for one is someone searching (the agent, e.g. AutoGen's
# web_search on bing.com or browser-use's search action), never the browser's own traffic, even on a
# host the browser also contacts by itself. Host pattern → path pattern; the query must carry q=.
SEARCH_PAGES = (
    (re.compile(r"(www\.)?google\.[a-z.]+", re.IGNORECASE), re.compile(r"/search")),
    (re.compile(r"(www\.|cn\.)?bing\.com", re.IGNORECASE), re.compile(r"/search")),
    (re.compile(r"(html\.|lite\.)?duckduckgo\.com", re.IGNORECASE), re.compile(r"/(html/?|lite/?)?")),
)

_BACKGROUND = [
    (reason, re.compile(pattern, re.IGNORECASE))
    for reason, patterns in BACKGROUND_HOSTS.items()
    for pattern in patterns
]


def normalise_host(host: str) -> str:
    """Lower-case a host name and drop a trailing dot."""
    return host.lower().rstrip(".")


def is_test_host(host: str) -> bool:
    """True for hosts under `.test`, the reserved TLD our origins serve."""
    return normalise_host(host).endswith(TEST_SUFFIX)


def is_search_host(host: str) -> bool:
    """Whether `host` is a search engine whose result pages we want to see (SEARCH_PAGES)."""
    return any(h.fullmatch(normalise_host(host)) for h, _ in SEARCH_PAGES)


def is_search_page(host: str, path: str) -> bool:
    """Whether `path` (with its query) on `host` is a search engine's results page for a query."""
    page, _, query = path.partition("?")
    host = normalise_host(host)
    return any(h.fullmatch(host) and p.fullmatch(page) for h, p in SEARCH_PAGES) and (
        query.startswith("q=") or "&q=" in query)


def background_reason(host: str, path: str | None = None) -> str | None:
    """Why the browser itself talks to `host` (update, sign-in, …), or None for other hosts and for a
    search engine's results page (`path` with its query, when known: someone searched)."""
    host = normalise_host(host)
    if path is not None and is_search_page(host, path):
        return None
    for reason, pattern in _BACKGROUND:
        if pattern.fullmatch(host):
            return reason
    return None
