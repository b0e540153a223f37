"""What the leak guard leaves for the capture addon: the `flow.metadata` keys of its decision and of the
records the request it sends derives (read once, by the guard), and the hash that identifies a request as
the agent made it and as it was sent (a `guard` record's original_sha256 and sent_sha256).

Kept apart from addons/leakguard.py: capture runs whether the guard is on or not, and reading the note
must not import the guard (its policy, the scenario model, YAML) into every proxy.
"""

import hashlib

from mitmproxy import http

GUARD_KEY = "spillage.guard"
DERIVED_KEY = "spillage.guard.derived"   # (the WireRequest the guard read, the records it derives)


def request_sha256(request: http.Request) -> str:
    """A hash of the whole request as an HTTP/1 message: request line, headers in order, blank line,
    body (so a change to the Referer alone changes it too)."""
    head = "".join(f"{name}: {value}\r\n" for name, value in request.headers.items(multi=True))
    digest = hashlib.sha256(f"{request.method} {request.pretty_url} {request.http_version}\r\n{head}\r\n"
                            .encode("utf-8", "surrogateescape"))
    digest.update(request.raw_content or b"")
    return digest.hexdigest()
