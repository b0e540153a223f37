"""What a session key's certificate binds besides the log: the files the audit reads from the session
folder and the fields of meta.json a report groups by (docs/EVIDENCE.md, "Bound inputs").

The runner states them in the certificate's `bound` claim, signed with the long-term key before the
agent starts: `files` names each file by its SHA-256 (the scenario copy), `meta` holds meta.json's
`scenario`, `agent`, `catalog` (whose `sha256` names the catalog the sites served), `condition` and
`model_endpoint` as they were written. `verify` checks the folder against them (`bound_problem`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spillage.proxy.layout import CATALOG_COPY
from spillage.proxy.layout import META_NAME
from spillage.proxy.layout import SCENARIO_COPY
from spillage.proxy.layout import file_sha256

#: meta.json's fields the certificate binds: what the session ran, under which condition, on which catalog.
BOUND_META = ("scenario", "agent", "catalog", "condition", "model_endpoint")
#: Said of a signed log whose certificate binds none of it.
NOT_BOUND = ("; inputs not bound: its certificate names no scenario copy, catalog or condition, so the audit "
             "and the report take scenario.yaml, the catalog and meta.json's labels on trust")


MISSING = object()   # a field meta.json lacks


def first_difference(where: str, found: Any, value: Any) -> tuple[str, Any, Any]:
    """The dotted name of the first field in which `found` (meta.json's) differs from `value` (the
    certificate's), and the two values there."""
    if isinstance(found, dict) and isinstance(value, dict):
        for key in sorted(set(found) | set(value)):
            if found.get(key, MISSING) != value.get(key, MISSING):
                return first_difference(f"{where}.{key}", found.get(key, MISSING), value.get(key, MISSING))
    return where, found, value


def bound_claim(session_dir: Path, meta: dict) -> dict:
    """The `bound` claim of a session whose scenario copy is written and whose meta.json is `meta`."""
    fields = json.loads(json.dumps({name: meta[name] for name in BOUND_META if name in meta}))  # as meta.json reads back
    return {"files": {SCENARIO_COPY: file_sha256(Path(session_dir) / SCENARIO_COPY)}, "meta": fields}


def bound_catalog(bound: Any) -> str | None:
    """The SHA-256 of the catalog a `bound` claim names (None when it names none)."""
    catalog = bound.get("meta", {}).get("catalog") if isinstance(bound, dict) else None
    return catalog.get("sha256") if isinstance(catalog, dict) else None


def bound_problem(session_dir: Path, bound: Any, meta: dict | None, unfinished: bool = False) -> str | None:
    """Why the session folder is not what its certificate's `bound` claim says (None when it is): a bound
    file missing or differing, meta.json's bound fields relabelled, or a catalog.sqlite in the folder that
    is not the bound catalog. When `unfinished` (a crash-sealed session, whose meta.json the runner never
    finished), a bound field meta.json lacks is not a relabelling; one it holds with another value is."""
    if not isinstance(bound, dict) or not isinstance(bound.get("files"), dict) or not isinstance(bound.get("meta"), dict):
        return "the certificate's bound claim is not {files, meta}"
    for name, digest in sorted(bound["files"].items()):
        path = Path(session_dir) / name
        if not path.is_file():
            return f"{name} is missing; the certificate binds it by SHA-256 {digest}"
        if (found := file_sha256(path)) != digest:
            return f"{name} hashes to {found}; the certificate binds SHA-256 {digest}: it was changed after the run began"
    for name, value in sorted(bound["meta"].items()):
        found = (meta or {}).get(name, MISSING)
        if found != value:
            where, found, value = first_difference(name, found, value)
            if found is MISSING and unfinished:
                continue
            said = "is missing" if found is MISSING else f"is {found!r}"
            return f"{META_NAME}'s {where} {said}; the certificate binds {value!r}: meta.json was relabelled"
    planted = Path(session_dir) / CATALOG_COPY
    if planted.is_file() and (found := file_sha256(planted)) != bound_catalog(bound):
        return (f"{CATALOG_COPY} (SHA-256 {found}) is not the catalog the certificate binds "
                f"({bound_catalog(bound)}): it was put there after the run")
    return None
