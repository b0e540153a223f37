"""Lay out a half of the outsider corpus for `spillage audit --evaluate`: its sessions with their files
unpacked, each judged by its scenario's labels as the project holds them now.

    python tests/outsider_corpus/prepare.py dev OUT      # then: spillage audit --evaluate OUT
    python tests/outsider_corpus/prepare.py test OUT [--shared ../shared]

- A benchmark persona's session gets the benchmark's scenario (its `match`, `cues` and concepts
  today), not the copy recorded when it ran: the catalog its sites served is the benchmark's, so
  it is rebuilt the same.
- An imported persona's session gets the persona imported afresh from the paper's released data
  (its prompts are the paper's sentences, which this project does not hold), with what today's
  importer derives; the catalog its sites served is built from the recorded copy (whose attributes
  the corpus keeps) and put beside it, checked against the SHA-256 its meta.json names. Without
  ../shared (a fresh clone) these sessions are left out, and their count said.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
SHARED = HERE.parents[2] / "shared"
FILLED = ("request", "prompt", "sanitized_prompt")   # the keys the redacted copies lack
CATALOGS = Path(tempfile.gettempdir()) / "spillage-outsider-catalogs"   # a store the halves share


def prepare(half: str, out: Path, shared: Path = SHARED) -> list[str]:
    """Write half `half` (dev or test) into `out`; the labels of the sessions left out (imported
    personas, when `shared` holds no paper data)."""
    doc = json.loads((HERE / half / "expected.json").read_text(encoding="utf-8"))
    left_out = []
    for name, entry in list(doc["sessions"].items()):
        session = out / "sessions" / name
        shutil.copytree(HERE / half / "sessions" / name, session)
        for packed in list(session.rglob("*.gz")):
            packed.with_suffix("").write_bytes(gzip.decompress(packed.read_bytes()))
            packed.unlink()
        if "imported" not in entry:
            benchmark_scenario(session)
        elif not imported_scenario(session, entry["imported"], shared):
            shutil.rmtree(session)
            del doc["sessions"][name]
            left_out.append(entry["label"])
    (out / "expected.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False), encoding="utf-8")
    return left_out


def write_scenario(session: Path, scenario) -> None:
    from spillage.scenarios.dump import scenario_yaml

    (session / "scenario.yaml").write_text(scenario_yaml(scenario), encoding="utf-8")


def benchmark_scenario(session: Path) -> None:
    """The session's scenario as the benchmark holds it now (same id and style)."""
    from spillage.origins.catalog import load_benchmark
    from spillage.audit.open_session import session_scenario

    recorded = session_scenario(session).id
    write_scenario(session, next(s for s in load_benchmark() if s.id == recorded))


def imported_scenario(session: Path, imported: dict, shared: Path) -> bool:
    """The imported persona afresh, beside the catalog its sites served (built from the recorded
    copy, made whole with the fresh import's prompts); False when the paper's data is not at hand."""
    data_file = shared / imported["file"]
    if not data_file.is_file():
        return False
    from spillage.origins.catalog import with_benchmark
    from spillage.origins.catalog_store import stored_catalog
    from spillage.proxy.layout import CATALOG_COPY, read_meta
    from spillage.scenarios.importers.spillage_json import import_spillage_json   # the project's importer
    from spillage.scenarios.loader import load_scenario

    redacted = session / "scenario.redacted.yaml"
    copy = yaml.safe_load(redacted.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        made = {p.stem: p for p in import_spillage_json(data_file, imported["site"], Path(tmp), "chat")}
        fresh_file = made[copy["id"]]
        fresh = yaml.safe_load(fresh_file.read_text(encoding="utf-8"))
        whole = {k: v for k, v in copy.items() if k not in ("attributes", "success", "styles")}
        whole.update({k: fresh[k] for k in FILLED if k in fresh})
        whole.update({k: copy[k] for k in ("attributes", "success", "styles") if k in copy})
        recorded_file = Path(tmp) / "recorded.yaml"
        recorded_file.write_text(yaml.safe_dump(whole, sort_keys=False, allow_unicode=True, width=110), encoding="utf-8")
        recorded, today = load_scenario(recorded_file), load_scenario(fresh_file)
    named = read_meta(session)["catalog"]
    path, sha256 = stored_catalog(CATALOGS, with_benchmark([recorded]), named["seed"])
    if sha256 != named["sha256"]:
        raise SystemExit(f"prepare: {session.name}: the recorded scenario builds catalog {sha256}, "
                         f"not the {named['sha256']} its sites served")
    shutil.copyfile(path, session / CATALOG_COPY)
    missing = {a.id for a in recorded.irrelevant} - {a.id for a in today.irrelevant}
    if missing:
        raise SystemExit(f"prepare: {session.name}: today's import lacks attributes {sorted(missing)}")
    write_scenario(session, today)
    redacted.unlink()
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("half", choices=("dev", "test"))
    parser.add_argument("out", type=Path)
    parser.add_argument("--shared", type=Path, default=SHARED)
    args = parser.parse_args()
    left = prepare(args.half, args.out, args.shared)
    if left:
        print(f"prepare: {len(left)} sessions of imported personas left out (no {args.shared / 'data'}): "
              + ", ".join(left), file=sys.stderr)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
