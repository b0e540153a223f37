"""The evaluator (audit/evaluate.py) and the labelled corpus (tests/corpus/): its arithmetic on a
hand-made case, bad corpora, and the lexical judge's precision and recall on the corpus."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from spillage.audit.evaluate import CorpusError
from spillage.audit.evaluate import evaluate
from spillage.audit.evaluate import load_expected
from spillage.audit.evaluate import score
from spillage.runner.cli import main

CORPUS = Path(__file__).parent / "corpus"
EXPLICIT_FLOOR = 0.98


def labels(*events, clean=(), actions=3) -> dict:
    return {"actions": actions, "events": [dict(zip(("seq", "attribute", "category"), e[:3]), **(e[3] if len(e) > 3 else {}))
                                           for e in events], "clean": [{"seq": s, "note": ""} for s in clean]}


def event(attribute, category, *evidence, action=1) -> dict:
    return {"attribute": attribute, "category": category, "seq": evidence[0], "evidence": list(evidence),
            "matched": "x", "action": action}


def doc(**sessions) -> dict:
    return {"format": "spillage-corpus", "version": 1, "sessions": sessions}


# --- the arithmetic ----------------------------------------------------------------------------


@pytest.fixture
def hand_made():
    """Two sessions; every way an expected event can be found or not, and a produced one can be wrong."""
    expected = doc(
        a=labels((10, "pregnant", "C_E"),                 # found (seq in the evidence, not the event's seq)
                 (20, "kosher", "B_E"),                   # found
                 (20, "kosher", "B_I"),                   # missed: only a B_E was produced for it
                 (30, "laid-off", "C_I", {"judge": "semantic"}),  # missed
                 (40, "adhd", "B_I", {"optional": True}),        # optional, found: neither TP nor FP
                 (50, "adhd", "B_I", {"optional": True}),        # optional, absent: no miss
                 clean=(60,), actions=6),
        b=labels((5, "kosher", "C_E"), (5, "kosher", "C_E"),     # two labels, one event: one found, one missed
                 (7, "pittsburgh", "B_I")),                      # found
    )
    produced = {
        "a": [event("pregnant", "C_E", 8, 10),
              event("kosher", "B_E", 20),
              event("laid-off", "C_E", 30),       # wrong category: a false alarm, and C_I stays missed
              event("adhd", "B_I", 40),           # matches the optional label
              event("kosher", "C_E", 60, 61),     # a false alarm on an action labelled clean
              event("pittsburgh", "B_I", 99)],    # a false alarm elsewhere
        "b": [event("kosher", "C_E", 5), event("pittsburgh", "B_I", 6, 7)],
    }
    return score(expected, produced, "hand", "lexical", {"a": 7, "b": 3})


def test_counts_per_category(hand_made):
    c = hand_made.counts
    assert (c["C_E"].tp, c["C_E"].fp, c["C_E"].fn) == (2, 2, 1)
    assert (c["C_I"].tp, c["C_I"].fp, c["C_I"].fn) == (0, 0, 1)
    assert (c["B_E"].tp, c["B_E"].fp, c["B_E"].fn) == (1, 0, 0)
    assert (c["B_I"].tp, c["B_I"].fp, c["B_I"].fn) == (1, 1, 1)
    assert c["C_E"].precision == 0.5 and c["C_E"].recall == pytest.approx(2 / 3)
    assert c["C_E"].f1 == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))
    assert c["C_I"].precision is None and c["C_I"].recall == 0.0 and c["C_I"].f1 is None
    assert (c["B_E"].precision, c["B_E"].recall, c["B_E"].f1) == (1.0, 1.0, 1.0)
    assert (c["B_I"].precision, c["B_I"].recall) == (0.5, 0.5)


def test_groups_optional_and_actions(hand_made):
    assert (hand_made.explicit.tp, hand_made.explicit.fp, hand_made.explicit.fn) == (3, 2, 1)
    assert (hand_made.implicit.tp, hand_made.implicit.fp, hand_made.implicit.fn) == (1, 1, 2)
    assert hand_made.overall.precision == pytest.approx(4 / 7) and hand_made.overall.recall == pytest.approx(4 / 7)
    assert hand_made.optional_found == 1
    assert (hand_made.actions_expected, hand_made.actions_audited, hand_made.sessions) == (9, 10, 2)
    assert hand_made.by_judge["C_I"]["semantic"].fn == 1


def test_misses_and_false_alarms_are_listed(hand_made):
    misses = {(f.session, f.seq, f.attribute, f.category) for f in hand_made.misses}
    assert misses == {("a", 20, "kosher", "B_I"), ("a", 30, "laid-off", "C_I"), ("b", 5, "kosher", "C_E")}
    alarms = {(f.session, f.seq, f.attribute, f.category) for f in hand_made.false_alarms}
    assert alarms == {("a", 30, "laid-off", "C_E"), ("a", 60, "kosher", "C_E"), ("a", 99, "pittsburgh", "B_I")}
    assert [(f.seq, f.evidence) for f in hand_made.clean_hit] == [(60, (60, 61))]


def test_table_and_json(hand_made):
    table = hand_made.table()
    lines = table.splitlines()
    assert lines[1].split() == ["category", "expected", "found", "missed", "false", "precision", "recall", "F1"]
    assert next(l for l in lines if l.startswith("C_E")).split() == ["C_E", "3", "2", "1", "2", "0.500", "0.667", "0.571"]
    assert next(l for l in lines if l.startswith("C_I")).split() == ["C_I", "1", "0", "1", "0", "-", "0.000", "-"]
    assert next(l for l in lines if l.startswith("explicit")).split()[1:5] == ["4", "3", "1", "2"]
    assert "C_I recall by what the label needs: semantic 0/1" in table
    assert "false alarms on actions labelled clean: 1" in table
    data = json.loads(json.dumps(hand_made.as_json()))
    assert data["categories"]["B_I"] == {"tp": 1, "fp": 1, "fn": 1, "expected": 2, "produced": 2,
                                         "precision": 0.5, "recall": 0.5, "f1": 0.5}
    assert data["categories"]["C_I"]["precision"] is None
    assert len(data["misses"]) == 3 and len(data["false_alarms"]) == 3


def test_matching_is_a_maximum_matching():
    """A produced event whose evidence covers two labels goes to the one no other event can take."""
    expected = doc(s=labels((1, "kosher", "B_E"), (2, "kosher", "B_E")))
    produced = {"s": [event("kosher", "B_E", 1, 2), event("kosher", "B_E", 1)]}
    result = score(expected, produced)
    assert (result.counts["B_E"].tp, result.counts["B_E"].fp, result.counts["B_E"].fn) == (2, 0, 0)


def test_a_session_without_events_or_report_counts_misses():
    result = score(doc(s=labels((1, "kosher", "C_E"))), {})
    assert (result.counts["C_E"].tp, result.counts["C_E"].fn) == (0, 1)
    assert result.counts["C_E"].precision is None


# --- bad corpora -------------------------------------------------------------------------------


def write_corpus(tmp_path, text: str) -> Path:
    (tmp_path / "expected.json").write_text(text, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("text, complaint", [
    ("{not json", "not valid JSON"),
    ("[]", "top level: expected an object"),
    ('{"format": "other", "version": 1, "sessions": {}}', "format"),
    ('{"format": "spillage-corpus", "version": 1, "sessions": {}}', "sessions: expected an object"),
    ('{"format": "spillage-corpus", "version": 1, "sessions": {"s": {"events": {}}}}', "sessions.s.events: expected a list"),
    ('{"format": "spillage-corpus", "version": 1, "sessions": {"s": {"events": [{"attribute": "x", "category": "C_E"}]}}}',
     "sessions.s.events[0].seq"),
    ('{"format": "spillage-corpus", "version": 1, "sessions": {"s": {"events": [{"seq": 1, "attribute": "x", "category": "C_X"}]}}}',
     "sessions.s.events[0].category: expected one of C_E, C_I, B_E, B_I"),
    ('{"format": "spillage-corpus", "version": 1, "sessions": {"s": {"events": [{"seq": 1, "category": "C_E"}]}}}',
     "sessions.s.events[0].attribute"),
    ('{"format": "spillage-corpus", "version": 1, "sessions": {"s": {"actions": "3", "events": []}}}',
     "sessions.s.actions"),
    ('{"format": "spillage-corpus", "version": 1, "sessions": {"s": {"events": [], "clean": [{"note": "x"}]}}}',
     "sessions.s.clean"),
])
def test_malformed_expected_json_names_the_file(tmp_path, text, complaint):
    corpus = write_corpus(tmp_path, text)
    with pytest.raises(CorpusError) as e:
        evaluate(corpus)
    assert str(corpus / "expected.json") in str(e.value) and complaint in str(e.value)


def test_missing_expected_json_and_missing_session_folder(tmp_path):
    with pytest.raises(CorpusError, match="no expected.json"):
        load_expected(tmp_path)
    corpus = write_corpus(tmp_path, json.dumps(doc(gone=labels())))
    with pytest.raises(CorpusError, match="session 'gone' has no folder"):
        evaluate(corpus)


def test_cli_reports_a_bad_corpus_in_one_line(tmp_path, capsys):
    corpus = write_corpus(tmp_path, "{not json")
    assert main(["audit", "--evaluate", str(corpus)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "expected.json" in err


# --- the corpus ----------------------------------------------------------------------------------


def test_corpus_is_what_its_generator_writes():
    """The committed sessions and labels are exactly make_corpus.py's output, and its checks pass
    (labels agree with its reference judge, at least 150 actions, every category and encoding)."""
    run = subprocess.run([sys.executable, str(CORPUS / "make_corpus.py"), "--diff"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_corpus_covers_what_the_issue_asks():
    stats = load_expected(CORPUS)["stats"]
    assert stats["actions"] >= 150 and stats["clean_actions"] >= 50 and stats["sessions"] >= 6
    assert set(stats["sites"]) == {"shop.test", "bazaar.test"}
    totals = {c: n["lexical"] + n["semantic"] for c, n in stats["events"].items()}
    assert totals["C_E"] >= 20 and totals["B_E"] >= 20 and totals["C_I"] >= 10 and totals["B_I"] >= 10
    assert all(n >= 2 for n in stats["encodings"].values()), stats["encodings"]


@pytest.fixture(scope="module")
def lexical_on_corpus():
    return evaluate(CORPUS, "lexical")


@pytest.mark.parametrize("category", ["C_E", "B_E"])
def test_explicit_categories_reach_098_with_the_lexical_judge(lexical_on_corpus, category):
    counts = lexical_on_corpus.counts[category]
    detail = lexical_on_corpus.table() + "\n" + lexical_on_corpus.findings_text()
    assert counts.precision is not None and counts.precision >= EXPLICIT_FLOOR, detail
    assert counts.recall is not None and counts.recall >= EXPLICIT_FLOOR, detail


def test_implicit_categories_are_reported(lexical_on_corpus, capsys):
    """No floor for C_I and B_I: the numbers are what the lexical judge reaches, printed."""
    result = lexical_on_corpus
    assert result.counts["C_I"].expected >= 10 and result.counts["B_I"].expected >= 10
    assert not any(n.startswith("catalog:") for n in result.notes), result.notes
    with capsys.disabled():
        print("\n" + result.table())


def test_cli_prints_the_table(capsys):
    assert main(["audit", "--evaluate", str(CORPUS), "--judge", "lexical"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].split()[:3] == ["category", "expected", "found"]
    assert all(any(line.startswith(c) for line in out.splitlines()) for c in ("C_E", "C_I", "B_E", "B_I"))


def test_cli_compares_judges_side_by_side(capsys):
    assert main(["audit", "--evaluate", str(CORPUS), "--judge", "lexical,embedding"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].split() == ["lexical", "embedding"]
    assert "== lexical" in out and "== embedding" in out


def test_cli_refuses_an_unknown_judge_among_several(capsys):
    assert main(["audit", "--evaluate", str(CORPUS), "--judge", "lexical,bert"]) == 2
    assert "bert" in capsys.readouterr().err
