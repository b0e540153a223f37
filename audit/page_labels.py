"""What a site's own pages call the things the agent may choose next: a product's title, a facet's
name, a section's heading, learned from the HTML responses of a site we did not build, by its profile's
`page_products`, `page_facets` and `page_sections` patterns (docs/SITE_PROFILES.md). A product opened by
its id alone, or a refinement chosen by a number, is then labelled as the page showed it, so that the
judge reads B_E (and B_I from cues) in live traffic, not only what the URL grammar gives."""

import html
import re
from urllib.parse import unquote

from spillage.origins.grammar import PAGE_LABELS
from spillage.origins.knowledge import SiteProfile
from spillage.proxy.reading.body import body_text
from spillage.proxy.reading.body import media_type
from spillage.proxy.reading.body import unpack

MAX_PAGE = 4 * 1024 * 1024   # characters of a page that are read
MAX_LABELS = 20_000          # labels kept per site and kind (a session of many pages)
MAX_LABEL = 300              # characters of one label


class PageLabels:
    """Labels learned from one session's responses, by (site, kind) and id."""

    def __init__(self) -> None:
        self.labels: dict[tuple[str, str], dict[str, str]] = {}

    @staticmethod
    def reads(profile: SiteProfile | None) -> bool:
        """Whether `profile` learns labels from its pages (only then is a response's body read)."""
        return profile is not None and any(getattr(profile.grammar, key) for key in PAGE_LABELS)

    def learn(self, profile: SiteProfile, headers, body: bytes) -> None:
        """Read an HTML page of the site: every id its patterns find, with the label shown for it."""
        found = {str(k).lower(): str(v) for k, v in headers or ()}
        kind, params = media_type(found.get("content-type", ""))
        if kind not in ("text/html", "application/xhtml+xml"):
            return
        text, _ = body_text(unpack(body, found.get("content-encoding", "")).data, params.get("charset"))
        text = text[:MAX_PAGE]
        for key, what in PAGE_LABELS.items():
            known = self.labels.setdefault((profile.host, what), {})
            for pattern in getattr(profile.grammar, key):
                for m in re.finditer(pattern, text):
                    ident = unquote(html.unescape(m["id"])).strip()
                    label = " ".join(html.unescape(re.sub(r"<[^>]*>", " ", m["label"])).split())[:MAX_LABEL]
                    if ident and label and len(known) < MAX_LABELS:
                        known.setdefault(ident, label)

    def label(self, profile: SiteProfile, what: str, ident) -> str | None:
        """The label a page of the site showed for `ident` (a product, facet or section), or None."""
        return self.labels.get((profile.host, what), {}).get(str(ident))
