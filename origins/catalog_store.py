"""Catalogs built once and kept in the spillage home by content hash.

A catalog is a deterministic function of its scenarios, its seed and the code that generates it
(the same inputs give the same bytes), so it is built once per input and stored read-only as
`<home>/catalogs/<sha256>.sqlite`; sessions name it by that hash instead of carrying a 4 MB copy.
`inputs/<key>` maps the hash of the inputs to the catalog's content hash, so a later run finds it
without generating anything:

    path, sha256 = stored_catalog(home, scenarios, seed)     # built on the first call only
    found = find_catalog(home, sha256)                      # a session's catalog, or None
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from pathlib import Path

from spillage.proxy.layout import file_sha256


CATALOG_DIR = "catalogs"
INPUTS_DIR = "inputs"
# What the catalog's bytes depend on besides its scenarios and seed: the generator, its word lists and
# vocabulary, and the writer.
GENERATOR_FILES = ("origins/generate.py", "origins/catalog.py", "origins/words.yaml", "scenarios/model.py",
                   "scenarios/vocabulary.py")
VOCABULARY = "scenarios/vocabulary"
PACKAGE = Path(__file__).resolve().parent.parent   # the spillage package: origins/ and scenarios/ are in it


def store_dir(home: Path) -> Path:
    return Path(home) / CATALOG_DIR


def catalog_file(home: Path, sha256: str) -> Path:
    """Where the catalog of content hash `sha256` is kept."""
    return store_dir(home) / f"{sha256}.sqlite"


def generator_digest() -> str:
    """The hash of the code and data that turn scenarios into a catalog."""
    vocabulary = sorted(f"{VOCABULARY}/{p.name}" for p in (PACKAGE / VOCABULARY).glob("*.yaml"))
    digest = hashlib.sha256()
    for name in (*GENERATOR_FILES, *vocabulary):
        digest.update(name.encode() + b"\0" + (PACKAGE / name).read_bytes() + b"\0")
    return digest.hexdigest()


def inputs_key(scenarios, seed: int) -> str:
    """The hash of everything a catalog is built from: the generator, the seed, and the scenarios:
    their content, not where their files lie; for the benchmark's (None), its files' bytes, so that
    finding its catalog parses nothing."""
    if scenarios is None:
        from spillage.scenarios.files import BENCHMARK_DIRS
        from spillage.scenarios.files import scenario_files

        content = [hashlib.sha256(path.read_bytes()).hexdigest() for path in scenario_files(BENCHMARK_DIRS)]
    else:
        content = [{k: v for k, v in dataclasses.asdict(s).items() if k not in ("file", "lines")} for s in scenarios]
    text = json.dumps({"generator": generator_digest(), "seed": seed, "scenarios": content},
                      sort_keys=True, ensure_ascii=False, default=sorted)  # sets, in a fixed order
    return hashlib.sha256(text.encode()).hexdigest()


_CHECKED: dict[Path, tuple] = {}   # stored catalogs hashed by this process, with the stat they had


def find_catalog(home: Path, sha256: str) -> Path | None:
    """The stored catalog whose bytes hash to `sha256`, or None (also when the file there does not).
    A file is hashed again only when its stat changed since this process last hashed it."""
    path = catalog_file(home, sha256)
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    seen = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if _CHECKED.get(path) != seen:
        if file_sha256(path) != sha256:
            return None
        _CHECKED[path] = seen
    return path


def store_catalog(home: Path, built: Path) -> str:
    """Keep the catalog file `built` in the store (moved when it is in the store's folder, else
    copied); its content hash."""
    sha256 = file_sha256(built)
    target = catalog_file(home, sha256)
    if not target.is_file():
        folder = store_dir(home)
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".catalog-", suffix=".sqlite", dir=folder)
        with os.fdopen(fd, "wb") as out, open(built, "rb") as source:
            while chunk := source.read(1 << 20):
                out.write(chunk)
        os.chmod(tmp, 0o444)
        os.replace(tmp, target)   # two builders of one catalog write the same bytes: either wins
    return sha256


def stored_catalog(home: Path, scenarios=None, seed: int = 0) -> tuple[Path, str]:
    """(path, content hash) of the catalog of `scenarios` (default: the benchmark's) and `seed`,
    built and stored on first use."""
    key = inputs_key(scenarios, seed)
    index = store_dir(home) / INPUTS_DIR / key
    if index.is_file():
        sha256 = index.read_text(encoding="ascii").strip()
        if (path := find_catalog(home, sha256)) is not None:
            return path, sha256
    from spillage.origins.catalog import build_catalog

    with tempfile.TemporaryDirectory(prefix="spillage-catalog-") as tmp:
        built = Path(tmp) / "built.sqlite"
        build_catalog(built, scenarios, seed)
        sha256 = store_catalog(home, built)
    index.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".key-", dir=index.parent)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(sha256 + "\n")
    os.replace(tmp, index)
    return catalog_file(home, sha256), sha256
