"""Which hosts are ours, and which outside hosts are the browser's own background traffic."""

import re

TEST_SUFFIX = ".test"

# Hosts browsers (or the agent framework driving them) contact on their own, grouped by why: Chromium and
# Chrome, Edge, Brave, Firefox, and browser-use (docs/AGENTS.md names them; what each sent through our
# proxy with a fresh profile is in tests/fixtures/browsers/README.md). A request to one of these is the
# browser's background traffic, never an agent action. Patterns are full-match regexes.
BACKGROUND_HOSTS: dict[str, tuple[str, ...]] = {
    "update": (
        r"update\.googleapis\.com",
        r"(.+\.)?gvt[12]\.com",
        r"dl\.google\.com",
        r"edgedl\.me\.gvt1\.com",
        r"optimizationguide-pa\.googleapis\.com",
        r"content-autofill\.googleapis\.com",
        r"redirector\.gvt1\.com",
        r"aus[0-9]\.mozilla\.org",                      # Firefox's (and its media plugins') update checks
        r"(go-updater|componentupdater|laptop-updates)\.brave\.com",
        r"msedge\.(api|b)\.tlu\.dl\.delivery\.mp\.microsoft\.com",
        r"edge\.microsoft\.com",                           # Edge's component and config service
    ),
    "safe-browsing": (
        r"safebrowsing\.googleapis\.com",
        r"sb-ssl\.google\.com",
        r"shavar\.services\.mozilla\.com",               # Firefox's tracking-protection lists
        r"(.+\.)?smartscreen(-prod)?\.microsoft\.com",
    ),
    "remote-settings": (
        r"firefox\.settings\.services\.mozilla\.com",    # Firefox Remote Settings and its attachments
        r"firefox-settings-attachments\.cdn\.mozilla\.net",
        r"normandy\.cdn\.mozilla\.net",                  # Firefox studies (Normandy)
        r"clientservices\.googleapis\.com",                # Chromium's variations seed
        r"variations\.brave\.com",
        r"config\.edge\.skype\.com",
    ),
    "telemetry": (
        r"(.+\.)?telemetry\.mozilla\.org",
        r"p3a(-json)?\.brave\.com",
        r"(.+\.)?events\.data\.microsoft\.com",
    ),
    "captive-portal": (
        r"detectportal\.firefox\.com",
        r"connectivitycheck\.gstatic\.com",
    ),
    "region": (
        r"location\.services\.mozilla\.com",
    ),
    "push": (
        r"push\.services\.mozilla\.com",
        r"mtalk\.google\.com",                              # Chromium's GCM
    ),
    "new-tab": (
        r"ads\.mozilla\.org",                               # Firefox's New Tab ads
        r"contile\.services\.mozilla\.com",
        r"static1\.brave\.com",
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

# Pages a browser opens or fetches on its own on hosts that are also sites an agent may visit: the host
# and path (without query) both full-match.
BACKGROUND_PAGES: dict[str, tuple[tuple[str, str], ...]] = {
    "first-run": ((r"www\.mozilla\.org", r"/([a-z]{2}(-[A-Z]{2})?/)?privacy/firefox/?"),   # and the tab's icon
                  (r"www\.mozilla\.org", r"/favicon\.ico")),
    "sign-in": ((r"accounts\.firefox\.com", r"/metrics-flow"),),
    "captive-portal": ((r"www\.gstatic\.com", r"/generate_204"),),
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


_PAGES = [
    (reason, re.compile(host, re.IGNORECASE), re.compile(path))
    for reason, pages in BACKGROUND_PAGES.items()
    for host, path in pages
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
    page = (path or "").partition("?")[0]
    for reason, h, p in _PAGES:
        if h.fullmatch(host) and p.fullmatch(page):
            return reason
    return None
