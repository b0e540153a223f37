"""Which catalog a session's sites served: the audit never guesses it.

In order: the file given (`spillage audit --catalog FILE`); the session's own `catalog.sqlite`;
the catalog meta.json names by its seed and the scenario it adds, rebuilt (the build is
deterministic: the same seed and scenarios give the same bytes); none, when meta.json says the
session has none (traffic of other sites, imported with `--no-catalog`): our sites are then read by
their URL grammar alone. Anything else is refused. The catalog used is named by its SHA-256.
"""

from __future__ import annotations

import atexit
import hashlib
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from spillage.proxy.layout import CATALOG_COPY
from spillage.proxy.layout import META_NAME
from spillage.proxy.layout import read_meta
from spillage.scenarios.model import Scenario


class CatalogError(RuntimeError):
    """The session does not say which catalog its sites served."""


@dataclass(frozen=True)
class SessionCatalog:
    """The catalog file to read site knowledge from (None: none), and how it was found."""

    path: Path | None
    source: str            # given, session, rebuilt, none
    sha256: str | None

    def as_json(self) -> dict:
        """What audit.json records of it."""
        return {"source": self.source, "sha256": self.sha256}


def file_sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def session_catalog(session_dir: Path, scenario: Scenario, given: Path | None = None) -> SessionCatalog:
    """The catalog of `session_dir` (see the module doc); CatalogError when it cannot be known."""
    if given is not None:
        if not given.is_file():
            raise CatalogError(f"{given}: no such catalog file")
        return SessionCatalog(given, "given", file_sha256(given))
    own = session_dir / CATALOG_COPY
    if own.is_file():
        return SessionCatalog(own, "session", file_sha256(own))
    try:
        meta = read_meta(session_dir) or {}
    except ValueError as e:
        raise CatalogError(str(e)) from None
    if "catalog" in meta and meta["catalog"] is None:
        return SessionCatalog(None, "none", None)
    named = meta.get("catalog")
    if isinstance(named, dict) and isinstance(named.get("seed"), int):
        adds = named.get("adds")
        if adds not in (None, scenario.id):
            raise CatalogError(f"{session_dir / META_NAME}: its catalog adds scenario {adds!r}, but the session's "
                               f"scenario is {scenario.id!r}; pass --catalog FILE")
        path = rebuilt(named["seed"], scenario if adds else None)
        return SessionCatalog(path, "rebuilt", file_sha256(path))
    raise CatalogError(f"{session_dir}: no {CATALOG_COPY}, and {META_NAME} does not say which catalog the sites "
                       f"served; pass --catalog FILE (`spillage origins catalog --seed N --out FILE` builds one)")


_REBUILT: dict[tuple, Path] = {}


def rebuilt(seed: int, adds: Scenario | None) -> Path:
    """The catalog built from the benchmark with `seed`, plus the scenario `adds` (once per process
    for the same seed and scenario)."""
    from spillage.origins.catalog import build_catalog
    from spillage.origins.catalog import with_benchmark
    from spillage.scenarios.dump import scenario_yaml

    key = (seed, scenario_yaml(adds) if adds else None)
    if key not in _REBUILT:
        folder = Path(tempfile.mkdtemp(prefix="spillage-catalog-"))
        atexit.register(shutil.rmtree, folder, True)
        build_catalog(folder / CATALOG_COPY, with_benchmark([adds]) if adds else None, seed)
        _REBUILT[key] = folder / CATALOG_COPY
    return _REBUILT[key]
