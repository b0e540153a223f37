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


def background_reason(host: str) -> str | None:
    """Why the browser itself talks to `host` (update, sign-in, …), or None for other hosts."""
    host = normalise_host(host)
    for reason, pattern in _BACKGROUND:
        if pattern.fullmatch(host):
            return reason
    return None
