"""Which catalog a session's sites served: the audit never guesses it.

In order: the file given (`spillage audit --catalog FILE`); the session's own `catalog.sqlite`
(sessions from before catalogs were stored once), unless meta.json names another catalog by SHA-256
(then it was planted, and is refused); the catalog meta.json names by its SHA-256, from
the spillage home's store (origins/catalog_store.py); that catalog rebuilt from its seed and the
scenario it adds (the build is deterministic: the same inputs give the same bytes, and the hash
is checked), and kept in the store; none, when meta.json says the session has none (traffic of
other sites, imported with `--no-catalog`): our sites are then read by their URL grammar alone.
Anything else is refused. The catalog used is named by its SHA-256.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from spillage.proxy.layout import file_sha256
from spillage.origins.catalog_store import find_catalog
from spillage.origins.catalog_store import stored_catalog
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
    source: str            # given, session, store, rebuilt, none
    sha256: str | None

    def as_json(self) -> dict:
        """What audit.json records of it."""
        return {"source": self.source, "sha256": self.sha256}


def session_catalog(session_dir: Path, scenario: Scenario | None, given: Path | None = None,
                    home: Path | None = None, meta_of: Callable[[Path], dict | None] = read_meta) -> SessionCatalog:
    """The catalog of `session_dir` (see the module doc), looked up in and rebuilt into the store of
    the spillage `home` (a temporary one when None); CatalogError when it cannot be known. `meta_of` reads
    the session's meta.json (an opened session's gives the one it read)."""
    if given is not None:
        if not given.is_file():
            raise CatalogError(f"{given}: no such catalog file")
        return SessionCatalog(given, "given", file_sha256(given))
    try:
        meta = meta_of(session_dir) or {}
    except ValueError as e:
        raise CatalogError(str(e)) from None
    named = meta.get("catalog")
    own = session_dir / CATALOG_COPY
    if own.is_file():
        sha256 = file_sha256(own)
        if isinstance(named, dict) and named.get("sha256") not in (None, sha256):
            raise CatalogError(f"{own}: its SHA-256 {sha256} is not the catalog's {META_NAME} names "
                               f"({named['sha256']}): it is not the catalog the sites served, and is not read")
        return SessionCatalog(own, "session", sha256)
    if "catalog" in meta and meta["catalog"] is None:
        return SessionCatalog(None, "none", None)
    store = Path(home) if home is not None else scratch_home()
    if isinstance(named, dict) and isinstance(named.get("sha256"), str):
        if (path := find_catalog(store, named["sha256"])) is not None:
            return SessionCatalog(path, "store", named["sha256"])
    if isinstance(named, dict) and isinstance(named.get("seed"), int):
        adds = named.get("adds")
        if adds is not None and scenario is None:
            raise CatalogError(f"{session_dir / META_NAME}: its catalog adds scenario {adds!r}, and the session "
                               f"keeps no scenario copy; pass --catalog FILE")
        if adds is not None and adds != scenario.id:
            raise CatalogError(f"{session_dir / META_NAME}: its catalog adds scenario {adds!r}, but the session's "
                               f"scenario is {scenario.id!r}; pass --catalog FILE")
        from spillage.origins.catalog import with_benchmark

        path, sha256 = stored_catalog(store, with_benchmark([scenario]) if adds else None, named["seed"])
        if named.get("sha256") not in (None, sha256):
            raise CatalogError(f"{session_dir / META_NAME}: its catalog has SHA-256 {named['sha256']}, which is not "
                               f"in {store} and is not what seed {named['seed']} builds with this version "
                               f"({sha256}); pass --catalog FILE")
        return SessionCatalog(path, "rebuilt", sha256)
    raise CatalogError(f"{session_dir}: no {CATALOG_COPY}, and {META_NAME} does not say which catalog the sites "
                       f"served; pass --catalog FILE (`spillage origins catalog --seed N --out FILE` builds one)")


_SCRATCH: list[Path] = []


def scratch_home() -> Path:
    """A catalog store for this process, when no spillage home is given (removed at exit)."""
    if not _SCRATCH:
        import atexit
        import shutil

        folder = Path(tempfile.mkdtemp(prefix="spillage-catalogs-"))
        atexit.register(shutil.rmtree, folder, True)
        _SCRATCH.append(folder)
    return _SCRATCH[0]
