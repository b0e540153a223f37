"""Audit one session folder: its capture log and its scenario, nothing else."""

from collections import Counter
from itertools import islice
from pathlib import Path

from spillage.audit.actions import ActionBuilder
from spillage.audit.leaks import CATEGORIES
from spillage.audit.leaks import explicit_events
from spillage.origins.knowledge import site_profiles
from spillage.proxy.capturelog import capture_path
from spillage.proxy.capturelog import iter_records
from spillage.proxy.capturelog import LOG_NAME
from spillage.proxy.verify import verify
from spillage.scenarios.loader import load_scenario
from spillage.scenarios.model import Scenario

SCENARIO_COPY = "scenario.yaml"
CATALOG_COPY = "catalog.sqlite"


class AuditError(RuntimeError):
    """The session cannot be audited (damaged log, no scenario)."""


def audit_session(session_dir: Path, scenario: Scenario | None = None,
                  allow_damaged: bool = False) -> dict:
    """Actions, explicit leak events and a summary for one session, as a JSON-ready dict.

    The scenario is the session's own copy unless one is given. The log is verified first;
    a damaged log is refused unless `allow_damaged`, in which case only the records before
    the damage are audited.
    """
    if not capture_path(session_dir).is_file():
        raise AuditError(f"{session_dir}: no {LOG_NAME} here; is this a session folder?")
    check = verify(session_dir)
    if not check.ok and not allow_damaged:
        raise AuditError(f"{session_dir / LOG_NAME}: capture log fails verification "
                         f"({check.damage}: {check.message}); use --allow-damaged to audit "
                         f"the records before the damage")
    if scenario is None:
        copy = session_dir / SCENARIO_COPY
        if not copy.exists():
            raise AuditError(f"{copy}: no scenario; pass --scenario")
        scenario = load_scenario(copy)
    catalog = session_dir / CATALOG_COPY
    builder = ActionBuilder(site_profiles(catalog if catalog.exists() else None))
    for line in islice(iter_records(session_dir), None if check.ok else check.line - 1):
        builder.add(line.record)
    actions = builder.finish()
    events = explicit_events(actions, scenario.irrelevant)
    counts = Counter(e.category for e in events)
    return {
        "session": session_dir.name,
        "scenario": scenario.id,
        "capture": {"ok": check.ok, "records": check.count, "head": check.head,
                    **({} if check.ok else {"damage": check.damage, "message": check.message})},
        "actions": [a.as_json(n) for n, a in enumerate(actions, start=1)],
        "events": [e.as_json() for e in events],
        "summary": {
            "actions": len(actions),
            "occurrences": {c: counts.get(c, 0) for c in CATEGORIES},
            "oversharing_rate": round(len(events) / len(actions), 4) if actions else 0.0,
            "leaked_attributes": sorted({e.attribute.id for e in events}),
            "irrelevant_attributes": [a.id for a in scenario.irrelevant],
            "judged": ["C_E", "B_E"],
        },
    }


def summary_text(report: dict) -> str:
    """A few human lines for a terminal."""
    s = report["summary"]
    occ = ", ".join(f"{k} {v}" for k, v in s["occurrences"].items())
    lines = [
        f"session {report['session']}  scenario {report['scenario']}",
        f"capture {'OK' if report['capture']['ok'] else 'DAMAGED'}: {report['capture']['records']} records",
        f"actions {s['actions']}  events {sum(s['occurrences'].values())} ({occ})  OR {s['oversharing_rate']}",
        f"leaked {len(s['leaked_attributes'])}/{len(s['irrelevant_attributes'])} irrelevant attributes: "
        + (", ".join(s["leaked_attributes"]) or "none"),
    ]
    for e in report["events"]:
        action = report["actions"][e["action"] - 1]
        lines.append(f"  {e['category']} {e['attribute']:<14} {action['kind']:<12} "
                     f"{action['text'][:50]!r} matched {e['matched']!r} seq {e['seq']}")
    return "\n".join(lines)
