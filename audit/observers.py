"""Who the observers are, as the web has them: a host's registrable domain (the Public Suffix List, as
the `publicsuffixlist` package ships it), first or third party by that domain, and the organisation
behind a known tracker (Ghostery's TrackerDB, npm `@ghostery/trackerdb`, which `make` puts in the venv;
docs/AUDIT.md, Observers, says how fresh it is and how to update it).
"""

from __future__ import annotations

import ipaddress
import json
import os
import sys
from functools import cache
from functools import lru_cache
from pathlib import Path

TRACKERDB_ENV = "SPILLAGE_TRACKERDB"   # another copy of the package's folder (its package.json beside dist/)
TRACKERDB_DIR = Path(sys.prefix) / "share" / "spillage" / "trackerdb"
REFUSED = "refused:"
MODEL = "model:"


@cache
def _psl():
    from publicsuffixlist import PublicSuffixList

    return PublicSuffixList()


@lru_cache(maxsize=4096)
def registrable_domain(host: str) -> str:
    """The domain a host's owner registered (www.amazon.co.uk → amazon.co.uk); an address, or a name
    that is itself a public suffix, is its own (kept per host: the guard asks it of every request)."""
    host = host.lower().rstrip(".").strip("[]")
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        return _psl().privatesuffix(host) or host


def observer_host(observer: str) -> str:
    """The host an observer name stands for (`refused:h`, `model:h:port`, a profile's site, a host)."""
    host = observer.removeprefix(REFUSED).removeprefix(MODEL)
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def same_party(observer: str, site: str) -> bool:
    """Whether `observer` is the site's own: the same registrable domain (never a refused host or a model)."""
    if observer.startswith((REFUSED, MODEL)):
        return False
    return registrable_domain(observer_host(observer)) == registrable_domain(site)


class TrackerList:
    """Ghostery's TrackerDB: a domain's tracker, its category and the organisation that runs it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        db = json.loads((folder / "dist" / "trackerdb.json").read_text(encoding="utf-8"))
        self.version = json.loads((folder / "package.json").read_text(encoding="utf-8"))["version"]
        self.domains, self.patterns, self.organizations = db["domains"], db["patterns"], db["organizations"]

    def lookup(self, host: str) -> dict | None:
        """{tracker, category, organisation} of the most specific listed domain `host` is under, or None."""
        labels = host.lower().rstrip(".").split(".")
        for i in range(len(labels) - 1):
            pattern = self.domains.get(".".join(labels[i:]))
            if pattern is not None:
                found = self.patterns[pattern]
                org = self.organizations.get(found.get("organization") or "", {})
                return {"tracker": found["name"], "category": found["category"],
                        "organisation": org.get("name") or found["name"]}
        return None

    def source(self) -> dict:
        return {"name": "@ghostery/trackerdb", "version": self.version, "license": "CC-BY-NC-SA-4.0"}


@cache
def tracker_list() -> TrackerList | None:
    """The installed tracker list, or None when there is none (`make trackerdb` installs it)."""
    folder = Path(os.environ.get(TRACKERDB_ENV) or TRACKERDB_DIR)
    return TrackerList(folder) if (folder / "dist" / "trackerdb.json").is_file() else None


def describe_observer(observer: str) -> dict:
    """An observer as audit.json gives it: its host's registrable domain, and its organisation and
    tracker category when the tracker list names it."""
    host = observer_host(observer)
    found = tracker_list().lookup(host) if tracker_list() is not None else None
    return {"observer": observer, "domain": registrable_domain(host),
            "organisation": found["organisation"] if found else None,
            "tracker": found["tracker"] if found else None,
            "category": found["category"] if found else None}


def tracker_source() -> dict | None:
    found = tracker_list()
    return found.source() if found is not None else None
