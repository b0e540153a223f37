"""Synthetic audited sessions with known counts, for the report tests and bench/bench_report.py.

A session folder gets what `spillage report` reads: meta.json (framework, model, condition), the
scenario copy (its style), a capture log signed as a run signs it (capture_helpers.runner_session: its
certificate binds the scenario copy and meta.json's labels; one that does not verify for `verified=False`)
and an audit.json in the shape of audit/audit.schema.json whose counts are the ones given, signed by
the same long-term key (AUDITOR)."""

from __future__ import annotations

import hashlib
import json
import tempfile
from functools import cache
from pathlib import Path

from capture_helpers import lines_of
from capture_helpers import put_lines
from capture_helpers import runner_session

from spillage.proxy.signing import load_or_create_key
from spillage.proxy.signing import sign_audit

CATEGORIES = ("C_E", "C_I", "B_E", "B_I")


def write_audited_session(root: Path, name: str, *, framework: str = "browser-use", model: str = "scripted:a",
                          site: str = "shop.test", style: str = "chat", prompt: str = "original",
                          actions: int = 10, occurrences: dict[str, int] | None = None, success: bool = True,
                          irrelevant: int = 5, recovered: list[set[str]] = (), verified: bool = True,
                          imported: bool = False) -> Path:
    """A session folder whose audit.json says exactly these numbers; `recovered` holds the parties
    (first-party, third-party) of each recovered irrelevant attribute; `imported`: made by `spillage
    import` (no agent in meta.json, an import provenance in the audit)."""
    occurrences = {c: 0 for c in CATEGORIES} | (occurrences or {})
    folder = root / name
    scenario = f"{site.split('.')[0]}-thing-{style}"
    copy = f"id: {scenario}\nsite: {site}\nstyle: {style}\n"
    source = {"format": "har", "file": "recorded.har", "size": 1234, "sha256": "a" * 64}
    labels = {"scenario": {"id": scenario}, "catalog": {"seed": 0, "sha256": "0" * 64},
              **({} if imported else {"agent": {"framework": framework, "model": model, "label": f"{framework}-{model}"},
                                      "condition": {"prompt": prompt, "system_note": ""}})}
    runner_session(folder, auditor(), labels=labels, scenario=copy)
    meta = json.loads((folder / "meta.json").read_text())
    (folder / "meta.json").write_text(json.dumps(
        meta | ({"import": source, "status": "imported"} if imported else {"status": "completed"})), encoding="utf-8")
    head = meta["capture"]["head"]
    if not verified:
        put_lines(folder, lines_of(folder)[:-1])   # cut: the log no longer ends where meta.json sealed it
    action_list = [{"n": n, "kind": "click", "what": "click", "channel": "content" if n % 2 else "behavioral",
                    "text": f"action {n}", "seq": n, "url": f"https://{site}/", "observers": [site],
                    "evidence": [n]} for n in range(1, actions + 1)]
    events = [{"category": c, "attribute": f"attr-{i % max(irrelevant, 1)}", "class": "health", "action": 1 + i % actions,
               "matched": f"word {i}", "seq": 1 + i % actions, "evidence": [1 + i % actions],
               "observers": [site, "metrics.test"], "judge": "lexical", "confidence": 1.0}
              for c in CATEGORIES for i in range(occurrences[c])]
    attributes = [{"attribute": f"attr-{i}", "class": "health", "recovered": i < len(recovered), "observers": [],
                   "parties": sorted(recovered[i]) if i < len(recovered) else [], "strongest": None, "chain": []}
                  for i in range(irrelevant)]
    first = sum("first-party" in p for p in recovered)
    third = sum("third-party" in p for p in recovered)
    rate = (lambda n: round(n / irrelevant, 4) if irrelevant else 0.0)
    share = (lambda n: round(n / actions, 4) if actions else 0.0)
    audit = {
        "format": "spillage-audit", "version": 1, "session": name, "scenario": scenario, "site": site, "first_party": site,
        "judge": "lexical",
        "scenario_sha256": hashlib.sha256(copy.encode()).hexdigest(),
        "capture": {"verified": verified, "records": 100, "audited_records": 100 if verified else 50,
                    "head": head, **({} if verified else {"damage": "modified", "message": "hash mismatch"})},
        "catalog": {"source": "session", "sha256": "0" * 64},
        "provenance": ({"source": "import", **source, "chain_vouches_for": "the import, not the original capture"}
                       if imported else {"source": "proxy", "chain_vouches_for": "the capture"}),
        "actions": action_list, "events": events,
        "choices": {"queries": [], "filters": [], "sorts": [], "viewed": [], "carted": [], "removed": [],
                    "listed": [], "watched": [], "checkouts": [], "final": {"products": [], "checked_out": success},
                    "task_success": success},
        "recoveries": {"attributes": attributes, "recovered": len(recovered), "total": irrelevant,
                       "rate": rate(len(recovered)), "first_party_rate": rate(first), "third_party_rate": rate(third)},
        "summary": {
            "actions": actions,
            "actions_by_channel": {"content": sum(a["channel"] == "content" for a in action_list),
                                   "behavioral": sum(a["channel"] == "behavioral" for a in action_list)},
            "occurrences": occurrences, "oversharing_rate": share(sum(occurrences.values())),
            "or_by_category": {c: share(n) for c, n in occurrences.items()}, "task_success": success,
            "recovery_rate": rate(len(recovered)), "first_party_recovery_rate": rate(first),
            "third_party_recovery_rate": rate(third),
            "leaked_attributes": sorted({e["attribute"] for e in events}),
            "irrelevant_attributes": [f"attr-{i}" for i in range(irrelevant)]},
    }
    (folder / "audit.json").write_text(json.dumps(sign_audit(audit, auditor()), indent=1), encoding="utf-8")
    return folder


@cache
def auditor():
    """The long-term key that signs every synthetic session and its audit (in a home of this process's)."""
    return load_or_create_key(Path(tempfile.mkdtemp(prefix="spillage-report-helpers-")))
