"""Score a judge against a labelled corpus of sessions: precision and recall per category.

A corpus is a folder of session folders (`sessions/<name>/` or `<name>/`) and an
`expected.json` naming, per session, the events an auditor must find (tests/corpus/README.md):

    {"format": "spillage-corpus", "version": 1,
     "sessions": {"<name>": {"actions": 17,
                             "events": [{"seq": 53, "attribute": "pregnant", "category": "C_E",
                                         "note": "why", "judge": "lexical", "optional": false}, ...],
                             "clean": [{"seq": 61, "note": "why it must not fire"}, ...]}}}

An expected event is found by a produced event of the same attribute and category whose
`evidence` holds the expected `seq`; each produced event finds at most one expected event (a
maximum matching, so the order of events never matters). Unfound expected events are misses
(false negatives), produced events that find none are false alarms (false positives). An
`optional` expected event neither counts as a miss when absent nor as a false alarm when found.

    result = evaluate(Path("tests/corpus"), judge="lexical")
    print(result.table())
    python -m spillage.audit.evaluate tests/corpus [--judge lexical] [--json]

Several judges side by side, each on the same corpus (options go to the judge that takes them):

    results = compare(Path("tests/corpus"), {"lexical": {}, "embedding": {"threshold": 0.55}})
    print(comparison_table(results))
    python -m spillage.audit.evaluate tests/corpus --judge lexical,embedding,llm --judge-url URL --judge-model NAME
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from spillage.audit.judges import DEFAULT_JUDGE
from spillage.proxy.documents import DocumentError
from spillage.proxy.documents import load_json

EXPECTED_NAME = "expected.json"
FORMAT, VERSION = "spillage-corpus", 1
CATEGORIES = ("C_E", "C_I", "B_E", "B_I")  # as in spillage.audit.model
EXPLICIT = ("C_E", "B_E")
IMPLICIT = ("C_I", "B_I")


class CorpusError(ValueError):
    """A corpus that cannot be evaluated: no expected.json, a malformed one, a missing session."""


@dataclass
class Counts:
    """True positives, false positives and false negatives of one category (or a group of them)."""

    tp: int = 0
    fp: int = 0
    fn: int = 0

    @property
    def expected(self) -> int:
        return self.tp + self.fn

    @property
    def produced(self) -> int:
        return self.tp + self.fp

    @property
    def precision(self) -> float | None:
        return self.tp / self.produced if self.produced else None

    @property
    def recall(self) -> float | None:
        return self.tp / self.expected if self.expected else None

    @property
    def f1(self) -> float | None:
        p, r = self.precision, self.recall
        if p is None or r is None:
            return None
        return 2 * p * r / (p + r) if p + r else 0.0

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.tp + other.tp, self.fp + other.fp, self.fn + other.fn)

    def as_json(self) -> dict:
        return {"tp": self.tp, "fp": self.fp, "fn": self.fn, "expected": self.expected, "produced": self.produced,
                "precision": _round(self.precision), "recall": _round(self.recall), "f1": _round(self.f1)}


@dataclass(frozen=True)
class Finding:
    """A miss (an expected event nobody produced) or a false alarm (a produced event nobody expected)."""

    session: str
    seq: int
    attribute: str
    category: str
    note: str = ""          # a miss: the label's note; a false alarm: what matched, and on which action
    evidence: tuple[int, ...] = ()

    def as_json(self) -> dict:
        return {"session": self.session, "seq": self.seq, "attribute": self.attribute, "category": self.category,
                "note": self.note, **({"evidence": list(self.evidence)} if self.evidence else {})}


@dataclass
class Evaluation:
    """What a judge found in a corpus, against its labels."""

    corpus: str
    judge: str
    sessions: int = 0
    counts: dict[str, Counts] = field(default_factory=lambda: {c: Counts() for c in CATEGORIES})
    by_judge: dict[str, dict[str, Counts]] = field(default_factory=dict)  # category → label judge → counts
    misses: list[Finding] = field(default_factory=list)
    false_alarms: list[Finding] = field(default_factory=list)
    optional_found: int = 0
    clean_hit: list[Finding] = field(default_factory=list)  # false alarms on an action labelled clean
    actions_expected: int = 0
    actions_audited: int = 0
    notes: list[str] = field(default_factory=list)

    def group(self, categories) -> Counts:
        total = Counts()
        for c in categories:
            total = total + self.counts[c]
        return total

    @property
    def explicit(self) -> Counts:
        return self.group(EXPLICIT)

    @property
    def implicit(self) -> Counts:
        return self.group(IMPLICIT)

    @property
    def overall(self) -> Counts:
        return self.group(CATEGORIES)

    def rows(self) -> list[tuple[str, Counts]]:
        """(name, counts) per category, then explicit, implicit and all."""
        return [(c, self.counts[c]) for c in CATEGORIES] + [
            ("explicit", self.explicit), ("implicit", self.implicit), ("all", self.overall)]

    def table(self) -> str:
        """A small fixed-width table: one row per category, then explicit, implicit and all."""
        head = f"{'category':<10}{'expected':>9}{'found':>7}{'missed':>8}{'false':>7}{'precision':>11}{'recall':>8}{'F1':>7}"
        lines = [f"corpus {self.corpus}  judge {self.judge}  sessions {self.sessions}  "
                 f"actions {self.actions_audited} audited / {self.actions_expected} labelled", head, "-" * len(head)]
        for i, (name, n) in enumerate(self.rows()):
            if i == len(CATEGORIES):
                lines.append("-" * len(head))
            lines.append(f"{name:<10}{n.expected:>9}{n.tp:>7}{n.fn:>8}{n.fp:>7}{_pct(n.precision):>11}"
                         f"{_pct(n.recall):>8}{_pct(n.f1):>7}")
        for category in IMPLICIT:
            parts = [f"{judge} {c.tp}/{c.expected}" for judge, c in sorted(self.by_judge.get(category, {}).items())
                     if c.expected]
            if parts:
                lines.append(f"{category} recall by what the label needs: " + ", ".join(parts))
        if self.optional_found:
            lines.append(f"optional labels found (not scored): {self.optional_found}")
        if self.clean_hit:
            lines.append(f"false alarms on actions labelled clean: {len(self.clean_hit)}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def findings_text(self, limit: int = 50) -> str:
        """The misses and false alarms, one line each (at most `limit` of each)."""
        lines = []
        for title, items in (("missed", self.misses), ("false alarm", self.false_alarms)):
            for f in items[:limit]:
                lines.append(f"{title:<11} {f.category} {f.attribute:<16} {f.session} seq {f.seq}: {f.note}")
            if len(items) > limit:
                lines.append(f"{title:<11} ... and {len(items) - limit} more")
        return "\n".join(lines)

    def as_json(self) -> dict:
        return {
            "corpus": self.corpus, "judge": self.judge, "sessions": self.sessions,
            "actions": {"labelled": self.actions_expected, "audited": self.actions_audited},
            "categories": {c: self.counts[c].as_json() for c in CATEGORIES},
            "explicit": self.explicit.as_json(), "implicit": self.implicit.as_json(), "all": self.overall.as_json(),
            "by_label_judge": {c: {j: n.as_json() for j, n in sorted(v.items())} for c, v in self.by_judge.items()},
            "optional_found": self.optional_found,
            "misses": [f.as_json() for f in self.misses],
            "false_alarms": [f.as_json() for f in self.false_alarms],
            "false_alarms_on_clean": [f.as_json() for f in self.clean_hit],
            "notes": self.notes,
        }


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


# --- reading a corpus ------------------------------------------------------------------------


def load_expected(corpus_dir: Path) -> dict:
    """expected.json of a corpus, checked; CorpusError naming the file and place when it is malformed."""
    path = Path(corpus_dir) / EXPECTED_NAME
    if not path.is_file():
        raise CorpusError(f"{path}: no {EXPECTED_NAME}; is {corpus_dir} a labelled corpus?")
    try:
        doc = load_json(path, 64 << 20, EXPECTED_NAME)
    except DocumentError as e:
        raise CorpusError(str(e)) from None

    def bad(where: str, what: str):
        raise CorpusError(f"{path}: {where}: {what}")

    if not isinstance(doc, dict):
        bad("top level", "expected an object")
    if (doc.get("format"), doc.get("version")) != (FORMAT, VERSION):
        bad("format", f"expected \"format\": \"{FORMAT}\" and \"version\": {VERSION}")
    sessions = doc.get("sessions")
    if not isinstance(sessions, dict) or not sessions:
        bad("sessions", "expected an object of session name → labels, not empty")
    for name, entry in sessions.items():
        where = f"sessions.{name}"
        if not isinstance(entry, dict):
            bad(where, "expected an object")
        if not isinstance(entry.get("actions", 0), int) or isinstance(entry.get("actions"), bool):
            bad(f"{where}.actions", "expected a whole number")
        events = entry.get("events")
        if not isinstance(events, list):
            bad(f"{where}.events", "expected a list")
        for i, e in enumerate(events):
            at = f"{where}.events[{i}]"
            if not isinstance(e, dict):
                bad(at, "expected an object")
            if not isinstance(e.get("seq"), int) or isinstance(e.get("seq"), bool) or e["seq"] < 0:
                bad(f"{at}.seq", "expected a record seq (a whole number >= 0)")
            if not isinstance(e.get("attribute"), str) or not e["attribute"]:
                bad(f"{at}.attribute", "expected an attribute id")
            if e.get("category") not in CATEGORIES:
                bad(f"{at}.category", f"expected one of {', '.join(CATEGORIES)}, got {e.get('category')!r}")
            if not isinstance(e.get("optional", False), bool):
                bad(f"{at}.optional", "expected true or false")
        clean = entry.get("clean", [])
        if not isinstance(clean, list) or any(not isinstance(c, dict) or not isinstance(c.get("seq"), int)
                                              for c in clean):
            bad(f"{where}.clean", "expected a list of objects with a seq")
    return doc


def session_dir(corpus_dir: Path, name: str) -> Path:
    """The folder of session `name` in a corpus: `sessions/<name>` or `<name>`."""
    for candidate in (Path(corpus_dir) / "sessions" / name, Path(corpus_dir) / name):
        if candidate.is_dir():
            return candidate
    raise CorpusError(f"{Path(corpus_dir) / EXPECTED_NAME}: session {name!r} has no folder "
                      f"({Path(corpus_dir) / 'sessions' / name} or {Path(corpus_dir) / name})")


def check_catalog(doc: dict, path: Path) -> list[str]:
    """Differences between the catalog facts the labels rely on and the default catalog (seed 0)."""
    facts = (doc.get("catalog") or {}).get("facts")
    if not facts:
        return []
    from spillage.origins.knowledge import site_profiles

    profiles = site_profiles()
    problems = []
    for host, site in facts.items():
        profile = profiles.get(host)
        if profile is None:
            problems.append(f"{host} is not a site of the default catalog")
            continue
        for pid, title in site.get("products", {}).items():
            p = profile.products.get(int(pid))
            if p is None or p.title != title:
                problems.append(f"{host} product {pid} is {p.title if p else 'gone'!r}, labelled {title!r}")
        for slug, label in site.get("facets", {}).items():
            f = profile.facets.get(slug)
            if f is None or f.label != label:
                problems.append(f"{host} facet {slug} is {f.label if f else 'gone'!r}, labelled {label!r}")
        for slug, title in site.get("sections", {}).items():
            s = profile.sections.get(slug)
            if s is None or s.title != title:
                problems.append(f"{host} section {slug} is {s.title if s else 'gone'!r}, labelled {title!r}")
    return problems


# --- scoring -----------------------------------------------------------------------------------


def _match(expected: list[dict], produced: list[dict], taken: set[int]) -> dict[int, int]:
    """A maximum matching expected index → produced index (Kuhn's augmenting paths); a produced
    event can find an expected one of its attribute and category whose seq is in its evidence."""
    edges = []
    for e in expected:
        edges.append([j for j, p in enumerate(produced) if j not in taken and p["attribute"] == e["attribute"]
                      and p["category"] == e["category"] and e["seq"] in p["_evidence"]])
    owner: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for j in edges[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in owner or augment(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(len(expected)):
        augment(i, set())
    return {i: j for j, i in owner.items()}


def score(doc: dict, produced: dict[str, list[dict]], corpus: str = "", judge: str = "",
          audited_actions: dict[str, int] | None = None) -> Evaluation:
    """Compare the labels of `doc` (a loaded expected.json) with the events each session produced
    (`produced[name]`: the "events" of its audit report) and count per category."""
    result = Evaluation(corpus=corpus, judge=judge, sessions=len(doc["sessions"]))
    for name, entry in doc["sessions"].items():
        result.actions_expected += entry.get("actions", 0)
        result.actions_audited += (audited_actions or {}).get(name, 0)
        events = []
        for e in produced.get(name, []):
            evidence = e.get("evidence") or [e.get("seq")]
            events.append({**e, "_evidence": {x for x in evidence if isinstance(x, int)}})
        required = [e for e in entry["events"] if not e.get("optional")]
        optional = [e for e in entry["events"] if e.get("optional")]
        found = _match(required, events, set())
        found_optional = _match(optional, events, set(found.values()))
        result.optional_found += len(found_optional)
        for i, e in enumerate(required):
            hit = i in found
            counts = result.counts[e["category"]]
            counts.tp += hit
            counts.fn += not hit
            per_judge = result.by_judge.setdefault(e["category"], {}).setdefault(e.get("judge", "lexical"), Counts())
            per_judge.tp += hit
            per_judge.fn += not hit
            if not hit:
                result.misses.append(Finding(name, e["seq"], e["attribute"], e["category"], e.get("note", "")))
        used = set(found.values()) | set(found_optional.values())
        clean = {c["seq"] for c in entry.get("clean", [])}
        for j, p in enumerate(events):
            if j in used:
                continue
            result.counts[p["category"]].fp += 1
            finding = Finding(name, p.get("seq", -1), p["attribute"], p["category"],
                              f"matched {p.get('matched')!r} on action {p.get('action')}",
                              tuple(sorted(p["_evidence"])))
            result.false_alarms.append(finding)
            if p["_evidence"] & clean:
                result.clean_hit.append(finding)
    return result


def _audit_function():
    from spillage.audit.session_audit import audit_session

    return audit_session


def evaluate(corpus_dir: Path, judge=DEFAULT_JUDGE, **judge_options) -> Evaluation:
    """Audit every session of the corpus with `judge` (a judge name, built with `judge_options`, or a
    judge object) and score the events against expected.json."""
    corpus_dir = Path(corpus_dir)
    doc = load_expected(corpus_dir)
    folders = {name: session_dir(corpus_dir, name) for name in doc["sessions"]}
    audit_session = _audit_function()
    notes = []
    kwargs = {}
    if "judge" in inspect.signature(audit_session).parameters:
        if isinstance(judge, str):
            from spillage.audit.judges import make_judge

            judge = make_judge(judge, **judge_options)
        kwargs["judge"] = judge
        judge_name = getattr(judge, "name", str(judge))
    else:  # an auditor without judges: its built-in explicit matching
        if judge_options or judge not in ("lexical", None):
            raise CorpusError(f"this auditor takes no judge; cannot evaluate judge {judge!r}")
        judge_name = "built-in"
        notes.append("audit_session takes no judge here: scored its built-in matching")
    produced, audited = {}, {}
    for name, folder in folders.items():
        report = audit_session(folder, **kwargs)
        produced[name] = report.get("events", [])
        audited[name] = len(report.get("actions", []))
    result = score(doc, produced, str(corpus_dir), judge_name, audited)
    result.notes = notes + [f"catalog: {p}" for p in check_catalog(doc, corpus_dir / EXPECTED_NAME)]
    if any(n.startswith("catalog:") for n in result.notes):
        result.notes.append("the default catalog changed: regenerate the corpus (tests/corpus/make_corpus.py)")
    return result


def compare(corpus_dir: Path, judges: dict) -> list[Evaluation]:
    """Evaluate each judge of `judges` (name → its options) on the corpus, in that order."""
    return [evaluate(corpus_dir, name, **options) for name, options in judges.items()]


def comparison_table(results: list[Evaluation]) -> str:
    """Precision and recall of several evaluations of one corpus side by side: one row per
    category, then explicit, implicit and all; then what each found of the labels that need
    meaning, and its false alarms on actions labelled clean."""
    first = results[0]
    head = f"{'category':<10}{'expected':>9}" + "".join(f"{'precision':>12}{'recall':>8}" for _ in results)
    names = " " * 19 + "".join(f"{r.judge:>20}" for r in results)
    lines = [f"corpus {first.corpus}  sessions {first.sessions}  actions {first.actions_audited} audited / "
             f"{first.actions_expected} labelled", names, head, "-" * len(head)]
    for i, row in enumerate(zip(*(r.rows() for r in results))):
        if i == len(CATEGORIES):
            lines.append("-" * len(head))
        lines.append(f"{row[0][0]:<10}{row[0][1].expected:>9}"
                     + "".join(f"{_pct(c.precision):>12}{_pct(c.recall):>8}" for _, c in row))
    for category in IMPLICIT:
        found = [(r.judge, r.by_judge.get(category, {}).get("semantic")) for r in results]
        if any(c and c.expected for _, c in found):
            lines.append(f"{category} labels that need meaning, found: "
                         + ", ".join(f"{j} {c.tp}/{c.expected}" for j, c in found if c))
    lines.append("false alarms on actions labelled clean: " + ", ".join(f"{r.judge} {len(r.clean_hit)}" for r in results))
    lines += [f"note: {n}" for n in dict.fromkeys(n for r in results for n in r.notes)]
    return "\n".join(lines)


def judge_options(name: str, threshold: float | None = None, base_url: str | None = None,
                  model: str | None = None) -> dict:
    """The command-line options judge `name` takes (the embedding judge a threshold, the llm
    judge a URL and model), leaving out those not given."""
    given = {"embedding": {"threshold": threshold}, "llm": {"base_url": base_url, "model": model}}.get(name, {})
    return {k: v for k, v in given.items() if v is not None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spillage.audit.evaluate", description=__doc__.split("\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--judge", default=DEFAULT_JUDGE, help="a judge, or several side by side: lexical,embedding,llm")
    parser.add_argument("--judge-url", help="llm judge: base URL of an OpenAI-compatible API (…/v1)")
    parser.add_argument("--judge-model", help="llm judge: the model name")
    parser.add_argument("--judge-threshold", type=float, help="embedding judge: similarity threshold")
    parser.add_argument("--json", action="store_true", help="print the whole evaluation as JSON")
    parser.add_argument("--findings", action="store_true", help="also list misses and false alarms")
    args = parser.parse_args(argv)
    from spillage.audit.judges import JudgeError

    try:
        print(evaluation_text(args.corpus, args.judge, args.judge_threshold, args.judge_url, args.judge_model,
                              args.json, args.findings))
    except (CorpusError, ValueError, JudgeError) as e:
        print(f"spillage: {e}", file=sys.stderr)
        return 2
    return 0


def evaluation_text(corpus_dir: Path, judges: str, threshold: float | None = None, base_url: str | None = None,
                    model: str | None = None, as_json: bool = False, findings: bool = False) -> str:
    """Evaluate one judge, or several side by side (`judges` = "lexical,embedding"), each with the
    options it takes, and return the table (with each judge's misses and false alarms when
    `findings`) or the JSON. Raises CorpusError, JudgeError or ValueError."""
    names = [n.strip() for n in judges.split(",") if n.strip()]
    if not names:
        raise ValueError("--judge: give a judge, or several separated by commas")
    results = compare(corpus_dir, {n: judge_options(n, threshold, base_url, model) for n in names})
    if as_json:
        doc = results[0].as_json() if len(results) == 1 else {"judges": {r.judge: r.as_json() for r in results}}
        return json.dumps(doc, indent=2)
    text = [results[0].table() if len(results) == 1 else comparison_table(results)]
    if findings:
        text += [(f"== {r.judge}\n" if len(results) > 1 else "") + r.findings_text() for r in results]
    return "\n".join(text)


if __name__ == "__main__":
    sys.exit(main())
