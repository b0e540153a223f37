"""Read the audited sessions of a batch: one row of counts per session, one row per leak event, and
the sessions that cannot be counted, each with its reason."""

from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

import pyarrow as pa
import yaml

from spillage.audit.progress import ProgressBar
from spillage.audit.batch import find_sessions
from spillage.audit.model import CATEGORIES
from spillage.audit.model import FIRST_PARTY
from spillage.audit.model import THIRD_PARTY
from spillage.audit.session_audit import FORMAT
from spillage.proxy.documents import DocumentError
from spillage.proxy.documents import load_json
from spillage.proxy.documents import read_text
from spillage.proxy.layout import MAX_AUDIT_BYTES
from spillage.proxy.layout import REPORT_NAME
from spillage.reports.options import KEYS
from spillage.reports.trust import audit_problem
from spillage.reports.trust import log_problem
from spillage.scenarios.loader import MAX_SCENARIO_BYTES
from spillage.proxy.layout import SCENARIO_COPY
from spillage.proxy.layout import META_NAME
from spillage.proxy.verify import identity_problem
from spillage.proxy.verify import verify

# What a session can be grouped or compared by, and where each value comes from.
NO_NOTE = UNKNOWN = "-"
# events.parquet's columns: the session, its grouping keys, then event_row's; the same types with no row.
EVENT_SCHEMA = pa.schema([
    *((name, pa.string()) for name in ("session", *KEYS)),
    ("category", pa.string()), ("attribute", pa.string()), ("class", pa.string()), ("action", pa.int64()),
    ("what", pa.string()), ("channel", pa.string()), ("text", pa.string()), ("matched", pa.string()),
    ("seq", pa.int64()), ("observers", pa.list_(pa.string())), ("judge", pa.string()), ("confidence", pa.float64()),
])


class ReportError(RuntimeError):
    """The report cannot be made (no sessions, a bad option); one line for the user."""


@dataclass
class Batch:
    """What a batch report is made of: counts per session, events, and the sessions left out."""

    sessions: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    observers: list[dict] = field(default_factory=list)   # one row per session and observer (audit.json's observers)
    excluded: list[tuple[str, str]] = field(default_factory=list)  # (session folder, reason)


def load_batch(paths: list[Path], include_unverified: bool = False, bar: bool = True,
               pins: frozenset[str] | None = None) -> Batch:
    """Every session below `paths`: its audit's counts and events, or why it is excluded.

    A session whose audit.json is missing, unreadable, not an audit or another session's, or not signed
    by a trusted key for this log, scenario and catalog (reports/trust.py), whose meta.json or scenario
    copy is missing, whose signed name, signer and meta.json disagree (a folder planted under another's
    name), or whose capture failed verification here, is unsigned or signed by a key not among `pins`
    (unless `include_unverified`; it is then counted as unverified) is excluded with its reason. Sessions come in folder-name order, so a report does not depend on the disk; a
    session is named by its folder's name, or by its path when two folders share a name. With `bar`, a
    terminal on stderr shows a progress bar (a report has no --progress: other streams get nothing)."""
    try:
        folders = sorted(find_sessions(paths), key=lambda p: (p.name, str(p)))
    except RuntimeError as e:
        raise ReportError(str(e)) from e
    names = [f.name for f in folders]
    unique = len(set(names)) == len(names)  # two batches of one matrix repeat their session names
    batch = Batch()
    with ProgressBar(len(folders), what="report", terminal=bar) as progress:
        for folder in folders:
            name = folder.name if unique else str(folder)
            try:
                session, events, observers = read_session(folder, name, pins, include_unverified)
            except SessionSkipped as e:
                batch.excluded.append((name, str(e)))
            else:
                batch.sessions.append(session)
                batch.events.extend(events)
                batch.observers.extend(observers)
            progress.step()
    return batch


class SessionSkipped(Exception):
    """Why one session cannot be counted."""


def read_session(folder: Path, name: str, pins: frozenset[str] | None = None,
                 include_unverified: bool = False) -> tuple[dict, list[dict], list[dict]]:
    """The counts row, the event rows and the observer rows of one audited session, named `name`;
    SessionSkipped says why not. Its log counts as verified when it verifies here, signed by its issuer or
    one of `pins`; one that does not is counted (as unverified) only with `include_unverified`."""
    if not (folder / REPORT_NAME).is_file():
        raise SessionSkipped(no_audit(folder))
    audit = read_json(folder / REPORT_NAME, "")
    meta = read_json(folder / META_NAME, "no meta.json")
    if not isinstance(audit, dict) or audit.get("format") != FORMAT:
        raise SessionSkipped(f"{REPORT_NAME} is not a spillage audit")
    if not isinstance(meta, dict):
        raise SessionSkipped(f"{META_NAME} is not a JSON object")
    disagree = identity_problem(folder)
    if disagree:
        raise SessionSkipped(f"its signed name, signer and meta.json disagree: {disagree}")
    if audit.get("session") != folder.name:
        raise SessionSkipped(f"{REPORT_NAME} is the audit of session {audit.get('session')!r}, not of this one")
    check = verify(folder)
    unverified = (log_problem(check, pins) or "" if check.ok else
                  f"capture failed verification ({check.damage}: {check.message})")
    if problem := audit_problem(folder, audit, check, pins):
        raise SessionSkipped(problem)
    if unverified and not include_unverified:
        raise SessionSkipped(unverified)
    try:
        keys = session_keys(folder, audit, meta)
        row = {"session": name, **keys, "verified": not unverified, **session_counts(audit)}
        events = [{"session": name, **keys, **event_row(e, audit["actions"][e["action"] - 1])}
                  for e in audit["events"]]
        observers = [{"session": name, **observer_row(o)} for o in audit.get("observers") or ()]
    except (KeyError, TypeError, IndexError, AttributeError) as e:
        raise SessionSkipped(f"{REPORT_NAME} is malformed ({type(e).__name__}: {e})") from e
    return row, events, observers


OBSERVER_COLUMNS = ["session", "observer", "domain", "party", "organisation", "category", "actions", "attributes"]


def observer_row(observer: dict) -> dict:
    """One observer of a session, flat for a table: who it is, and which irrelevant attributes it received."""
    return {"observer": observer["observer"], "domain": observer["domain"], "party": observer["party"],
            "organisation": observer["organisation"] or "", "category": observer["category"] or "",
            "actions": int(observer["actions"]), "attributes": " ".join(observer["received"]["attributes"])}


def no_audit(folder: Path) -> str:
    """Why a session without audit.json is left out, with the command that audits it."""
    check = verify(folder)
    if check.ok:
        return f"no audit.json: `spillage audit {folder}` writes it"
    return (f"no audit.json, and its capture does not verify ({check.damage}): `spillage audit --allow-unverified "
            f"{folder}` audits it up to the damage, and `spillage report --include-unverified` counts it")


def read_json(path: Path, missing: str):
    if not path.is_file():
        raise SessionSkipped(missing)
    try:
        return load_json(path, MAX_AUDIT_BYTES, path.name)
    except DocumentError as e:
        raise SessionSkipped(f"{path.name} is unreadable ({e.problem})") from None


def session_keys(folder: Path, audit: dict, meta: dict) -> dict:
    """The grouping values of a session: framework and model and condition from meta.json, site,
    scenario and style from the audit (style from the scenario copy for an audit that lacks it). A
    session imported from a file (`spillage import`) has framework `imported`; what meta.json does not
    say is `-`."""
    condition, agent = meta.get("condition") or {}, meta.get("agent") or {}
    return {
        "framework": agent.get("framework") or ("imported" if "import" in meta else UNKNOWN),
        "model": agent.get("model") or agent.get("label") or UNKNOWN,
        "site": audit["site"],
        "style": audit.get("style") or scenario_style(folder),   # audits before 'style' read the copy
        "scenario": audit["scenario"],
        "prompt": condition.get("prompt", "original"),
        "note": condition.get("system_note") or NO_NOTE,
        "guard": condition.get("guard") or "off",
    }


def scenario_style(folder: Path) -> str:
    path = folder / SCENARIO_COPY
    if not path.is_file():
        raise SessionSkipped(f"{SCENARIO_COPY} is missing")
    try:
        text = read_text(path, MAX_SCENARIO_BYTES, "scenario file")
        scenario = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except DocumentError as e:
        raise SessionSkipped(f"{SCENARIO_COPY} is unreadable ({e.problem})") from None
    except (yaml.YAMLError, RecursionError) as e:
        raise SessionSkipped(f"{SCENARIO_COPY} is not YAML ({type(e).__name__})") from None
    if not isinstance(scenario, dict) or not scenario.get("style"):
        raise SessionSkipped(f"{SCENARIO_COPY} has no style")
    return str(scenario["style"])


def session_counts(audit: dict) -> dict:
    """The numbers the batch statistics pool (whether the log verified is the report's own finding, not
    the audit's): actions, occurrences, success, recovered attributes, and
    what the agent attempted before the guard (the same as delivered without one)."""
    summary, recovered = audit["summary"], audit["recoveries"]
    parties = [set(a["parties"]) for a in recovered["attributes"]]
    attempted = summary.get("attempted_occurrences", summary["occurrences"])   # audits before the guard
    return {
        "imported": (audit.get("provenance") or {}).get("source") == "import",
        "incomplete": bool((audit.get("provenance") or {}).get("lacks")),   # an import missing part of the traffic
        "actions": int(summary["actions"]),
        **{c: int(summary["occurrences"][c]) for c in CATEGORIES},
        "task_success": int(bool(summary["task_success"])),
        "irrelevant": int(recovered["total"]),
        "recovered": int(recovered["recovered"]),
        "recovered_first_party": sum(FIRST_PARTY in p for p in parties),
        "recovered_third_party": sum(THIRD_PARTY in p for p in parties),
        "attempted_actions": int(summary.get("attempted_actions", summary["actions"])),
        **{f"attempted_{c}": int(attempted[c]) for c in CATEGORIES},
        "interventions": int((audit.get("guard") or {}).get("interventions", 0)),
    }


def event_row(event: dict, action: dict) -> dict:
    """One leak event with the action it belongs to, flat for a table."""
    return {
        "category": event["category"], "attribute": event["attribute"], "class": event["class"],
        "action": event["action"], "what": action["what"], "channel": action["channel"],
        "text": action["text"], "matched": event["matched"], "seq": event["seq"],
        "observers": list(event["observers"]), "judge": event["judge"],
        "confidence": float(event["confidence"]),
    }
