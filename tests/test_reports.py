"""`spillage report` on synthetic audits with known counts: every number of the tables, the CIs,
reproducibility, excluded sessions, comparisons, and the files' shapes."""

import io
import itertools
import json
import math
import re
import sys
from collections import Counter
from pathlib import Path

import jsonschema
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset
import pytest
from scipy.stats import bootstrap

from report_helpers import write_audited_session
from spillage.audit.session_audit import SCHEMA_PATH
from spillage.reports.plots import draw
from spillage.reports.plots import label_box
from spillage.reports.sessions import EVENT_SCHEMA
from spillage.reports.sessions import load_batch
from spillage.runner.cli import main

CORPUS = Path(__file__).parent / "corpus" / "sessions"
OUTPUTS = ("report.md", "report.html", "tables.csv", "sessions.csv", "events.parquet", "plots/occurrences.svg",
           "plots/or.svg", "plots/success_vs_or.svg")
G1 = ("browser-use", "scripted:a", "shop.test", "chat")
G2 = ("autogen", "scripted:b", "bazaar.test", "email")
G3 = ("browser-use", "scripted:a", "shop.test", "generic")


def keys(group, prompt="original"):
    framework, model, site, style = group
    return dict(framework=framework, model=model, site=site, style=style, prompt=prompt)


@pytest.fixture
def runs(tmp_path):
    """Three groups (three sessions, one session, two identical sessions) and three bad sessions."""
    root = tmp_path / "runs"
    write_audited_session(root, "s1", **keys(G1), actions=10, occurrences={"C_E": 2, "B_E": 1},
                          recovered=[{"first-party"}, {"first-party", "third-party"}])
    write_audited_session(root, "s2", **keys(G1), actions=20, occurrences={"C_I": 1, "B_E": 3, "B_I": 2},
                          success=False, recovered=[{"third-party"}])
    write_audited_session(root, "s3", **keys(G1), actions=10, occurrences={"C_E": 1})
    write_audited_session(root, "s4", **keys(G2), actions=8, occurrences={"B_I": 2}, irrelevant=4,
                          recovered=[{"third-party"}])
    for name in ("s5", "s6"):
        write_audited_session(root, name, **keys(G3), actions=5, occurrences={"C_E": 1}, recovered=[{"first-party"}])
    write_audited_session(root, "x-garbage", **keys(G1)).joinpath("audit.json").write_text("{not json")
    write_audited_session(root, "x-missing", **keys(G1), verified=False).joinpath("audit.json").unlink()
    write_audited_session(root, "x-unverified", **keys(G1), occurrences={"C_E": 9}, verified=False)
    return root


def report(runs, out, *extra):
    """`spillage report` grouped by the four keys these tests' groups are made of, unless told --by."""
    by = () if "--by" in extra else ("--by", "framework,model,site,style")
    assert main(["report", str(runs), "--out", str(out), "--quiet", *by, *extra]) == 0
    return pd.read_csv(out / "tables.csv", keep_default_na=False, na_values=[""]), (out / "report.md").read_text()


def row(table, group):
    framework, model, site, style = group
    found = table[(table["framework"] == framework) & (table["model"] == model) & (table["site"] == site)
                  & (table["style"] == style)]
    assert len(found) == 1
    return found.iloc[0]


def test_synthetic_audit_has_the_real_schema(tmp_path):
    folder = write_audited_session(tmp_path, "s", occurrences={"C_E": 2, "B_I": 1}, recovered=[{"first-party"}])
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.validate(json.loads((folder / "audit.json").read_text()), schema)


def test_every_count_and_rate_of_a_group(runs, tmp_path):
    table, md = report(runs, tmp_path / "out")
    g1 = row(table, G1)
    assert (g1.sessions, g1.unverified, g1.actions, g1.C_E, g1.C_I, g1.B_E, g1.B_I) == (3, 0, 40, 3, 1, 4, 2)
    expected = {"or_C_E": 3 / 40, "or_C_I": 1 / 40, "or_B_E": 4 / 40, "or_B_I": 2 / 40, "or_all": 10 / 40,
                "behavioral_content": 6 / 4, "task_success": 2 / 3, "recovery": 3 / 15,
                "recovery_first_party": 2 / 15, "recovery_third_party": 2 / 15}
    for name, value in expected.items():
        assert g1[name] == pytest.approx(value, rel=1e-12), name
    assert ("| browser-use | scripted:a | shop.test | chat | 3 | 40 | 3 | 1 | 4 | 2 | 0.075 [" in md)
    cells = re.search(r"\| browser-use \| scripted:a \| shop.test \| chat \| 3 \| (.*) \|\n", md.split("## Task")[1])[1]
    assert [c.split(" [")[0] for c in cells.split(" | ")] == ["0.667", "0.200", "0.133", "0.133"]
    g2 = row(table, G2)
    assert (g2.sessions, g2.actions, g2.B_I, g2.or_B_I, g2.recovery_third_party) == (1, 8, 2, 0.25, 0.25)
    assert math.isnan(g2.behavioral_content)  # no content occurrences: 2 / 0 is undefined


def test_ci_is_the_percentile_bootstrap_of_the_pooled_ratio(runs, tmp_path):
    table, _ = report(runs, tmp_path / "out")
    occurrences, actions = np.array([3.0, 6.0, 1.0]), np.array([10.0, 20.0, 10.0])
    ci = bootstrap((np.arange(3),), lambda i, axis=-1: occurrences[i].sum(axis) / actions[i].sum(axis),
                   n_resamples=10_000, method="percentile", vectorized=True, rng=np.random.default_rng(0)
                   ).confidence_interval
    g1 = row(table, G1)
    assert (g1.or_all_low, g1.or_all_high) == pytest.approx((ci.low, ci.high), rel=1e-12)


def test_each_ci_contains_its_estimate(runs, tmp_path):
    table, _ = report(runs, tmp_path / "out")
    names = [c[:-4] for c in table.columns if c.endswith("_low")]
    checked = 0
    for _, r in table.iterrows():
        for name in names:
            if not math.isnan(r[f"{name}_low"]):
                assert r[f"{name}_low"] <= r[name] <= r[f"{name}_high"], (name, r[name])
                checked += 1
    assert checked >= 15


def test_one_session_and_zero_variance_groups_say_so(runs, tmp_path):
    table, md = report(runs, tmp_path / "out")
    g2, g3 = row(table, G2), row(table, G3)
    assert math.isnan(g2.or_all_low) and g2.or_all_note == "one session: no CI"
    assert "| autogen | scripted:b | bazaar.test | email | 1 | 8 | 0 | 0 | 0 | 2 | 0.000 [no CI]" in md
    assert "- autogen / scripted:b / bazaar.test / email: all rates: one session: no CI" in md
    assert (g3.or_C_E, g3.or_C_E_low, g3.or_C_E_high) == (0.2, 0.2, 0.2)
    assert "0.200 [0.200, 0.200]" in md and "a CI of [v, v] means every resample gave the same value" in md


def test_same_seed_same_bytes_other_seed_other_cis(runs, tmp_path):
    for i in range(8):
        write_audited_session(runs, f"v{i}", model="scripted:varied", actions=10 + i, occurrences={"C_E": i})
    report(runs, tmp_path / "a")
    report(runs, tmp_path / "b")
    for name in OUTPUTS:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    report(runs, tmp_path / "c", "--seed", "7")
    assert (tmp_path / "c" / "tables.csv").read_bytes() != (tmp_path / "a" / "tables.csv").read_bytes()
    assert "seed 7" in (tmp_path / "c" / "report.md").read_text()


def test_bad_sessions_are_listed_never_dropped(runs, tmp_path):
    _, md = report(runs, tmp_path / "out")
    excluded = md.split("## Excluded sessions")[1]
    assert "- x-garbage: audit.json is unreadable" in excluded
    assert "- x-missing: no audit.json, and its capture does not verify (truncated): `spillage audit " \
           "--allow-unverified " in excluded
    assert "- x-unverified: capture failed verification" in excluded
    assert md.startswith("# Spillage batch report\n\n6 sessions, 3 excluded")


def test_unverified_sessions_included_on_request_are_flagged(runs, tmp_path):
    table, md = report(runs, tmp_path / "out", "--include-unverified")
    g1 = row(table, G1)
    assert (g1.sessions, g1.unverified, g1.C_E) == (4, 1, 12)
    assert "| browser-use | scripted:a | shop.test | chat | 4 (1†) |" in md
    assert "† marks sessions whose capture failed verification" in md


def test_imported_sessions_are_grouped_apart_and_the_report_says_what_their_chain_vouches_for(runs, tmp_path):
    write_audited_session(runs, "from-a-har", imported=True, occurrences={"C_E": 1})
    table, md = report(runs, tmp_path / "out")
    assert row(table, ("imported", "-", "shop.test", "chat")).sessions == 1
    assert "1 of the sessions were imported from capture files" in md
    assert "not for the original capture" in md


def test_compare_two_prompts_per_group(tmp_path):
    root = tmp_path / "runs"
    for i, (a, b) in enumerate([(4, 1), (2, 1), (3, 0)]):
        write_audited_session(root, f"o{i}", prompt="original", actions=10, occurrences={"C_E": a})
        write_audited_session(root, f"s{i}", prompt="sanitized", actions=10, occurrences={"C_E": b})
    write_audited_session(root, "lonely", model="scripted:z", prompt="original", actions=10)
    out = tmp_path / "out"
    assert main(["report", str(root), "--out", str(out), "--quiet", "--compare", "prompt=original",
                 "prompt=sanitized"]) == 0
    compared = pd.read_csv(out / "compare.csv", keep_default_na=False, na_values=[""])
    c_e = compared[compared.metric == "or_C_E"].iloc[0]
    assert (c_e.sessions_a, c_e.sessions_b) == (3, 3)
    assert (c_e.a, c_e.b, c_e.difference) == pytest.approx((0.3, 0.0667, -0.2333), abs=1e-4)
    assert c_e.difference_low <= c_e.difference <= c_e.difference_high < 0
    md = (out / "report.md").read_text()
    assert "## Comparison: prompt=original against prompt=sanitized" in md
    assert "| OR C_E | 0.300 | 0.067 | -0.233 | [" in md
    assert "scripted:z only with prompt=original" in md   # grouped by what varies besides: the model


def test_events_parquet_holds_every_event(runs, tmp_path):
    report(runs, tmp_path / "out")
    events = pd.read_parquet(tmp_path / "out" / "events.parquet")
    assert len(events) == 3 + 6 + 1 + 2 + 2
    assert events.groupby("category").size().to_dict() == {"B_E": 4, "B_I": 4, "C_E": 5, "C_I": 1}
    assert set(events.session) == {"s1", "s2", "s3", "s4", "s5", "s6"}
    assert list(events.observers.iloc[0]) == ["shop.test", "metrics.test"]


def test_events_parquet_of_a_batch_without_events_has_the_same_typed_columns(runs, tmp_path):
    write_audited_session(tmp_path / "quiet", "q1")
    report(tmp_path / "quiet", tmp_path / "empty")
    report(runs, tmp_path / "full")
    files = [str(tmp_path / name / "events.parquet") for name in ("empty", "full")]
    combined = pyarrow.dataset.dataset(files, format="parquet").to_table()
    assert combined.num_rows == 14
    assert combined.schema.equals(EVENT_SCHEMA)
    types = {f.name: f.type for f in combined.schema}
    assert (types["session"], types["action"], types["seq"], types["confidence"], types["observers"]) == (
        pa.string(), pa.int64(), pa.int64(), pa.float64(), pa.list_(pa.string()))


def test_html_is_one_self_contained_file(runs, tmp_path):
    report(runs, tmp_path / "out")
    page = (tmp_path / "out" / "report.html").read_text()
    assert page.count("<svg") == 3 and "<table>" in page and "<script" not in page and "<?xml" not in page
    assert not re.search(r"""\b(src|href)\s*=\s*["'](?!#)|@import|url\((?!#)""", page)  # only links within the page
    defined = Counter(re.findall(r'\bid="([^"]+)"', page))
    referenced = set(re.findall(r"url\(#([^)]+)\)", page)) | set(re.findall(r'href="#([^"]+)"', page))
    assert referenced and all(defined[name] == 1 for name in referenced)  # the three plots share no id


def test_png_plots_need_no_browser_and_are_reproducible(runs, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "")  # no chromium to be found
    for out in ("a", "b"):
        _, md = report(runs, tmp_path / out, "--png")
    for name in ("occurrences", "or", "success_vs_or"):
        png = (tmp_path / "a" / "plots" / f"{name}.png").read_bytes()
        assert png.startswith(b"\x89PNG\r\n\x1a\n") and png == (tmp_path / "b" / "plots" / f"{name}.png").read_bytes()
        assert f"(plots/{name}.png)" in md
        assert "<dc:date>" not in (tmp_path / "a" / "plots" / f"{name}.svg").read_text()


def plot_table(points: list[tuple[float, float]], counts: list[dict] | None = None) -> pd.DataFrame:
    """A group table with what the plots read: one group per point (OR, task success, each with a CI
    of ±0.05) and its occurrences per category (none unless given)."""
    rows = []
    for n, ((rate, success), count) in enumerate(zip(points, counts or [{}] * len(points)), start=1):
        rows.append({"framework": "fw", "model": f"model-{n}", **{c: 0 for c in ("C_E", "C_I", "B_E", "B_I")}, **count,
                     **{f"{m}{end}": v + shift for m, v in (("or_all", rate), ("task_success", success))
                        for end, shift in (("", 0), ("_low", -0.05), ("_high", 0.05))}})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("totals", [[3, 1], [10, 4], [7, 0]])
def test_occurrence_ticks_are_whole_numbers(totals):
    """The hand-drawn axis split 0..10 in quarters and printed 2.5 and 7.5 as "2" and "8"."""
    figure = draw("occurrences", plot_table([(0.1, 1)] * len(totals), [{"C_E": n} for n in totals]), ("model",))
    figure.canvas.draw()
    (ax,) = figure.axes
    ticks = [(label.get_position()[0], label.get_text()) for label in ax.get_xticklabels()]
    assert len(ticks) >= 2
    for position, text in ticks:
        assert position == int(position) and text == str(int(position)), ticks


def test_success_against_or_numbers_never_cover_each_other():
    """Six groups on one spot and two next to it: the hand-drawn plot cycled its labels through four
    offsets, so the 1st and 5th number of one spot printed over each other."""
    figure = draw("success_vs_or", plot_table([(0.2, 1.0)] * 6 + [(0.21, 0.98), (0.0, 0.5)]), ("framework", "model"))
    figure.canvas.draw()
    ax = figure.axes[0]
    renderer = figure.canvas.get_renderer()
    assert sorted(int(t.get_text()) for t in ax.texts) == list(range(1, 9))
    boxes = [label_box(t, renderer) for t in ax.texts]
    assert not [(a, b) for a, b in itertools.combinations(boxes, 2) if a.overlaps(b)]
    key = [t.get_text() for t in ax.get_legend().get_texts()]
    assert key[0] == "1  fw / model-1" and len(key) == 8


def test_success_against_or_is_a_band_when_every_group_succeeds():
    """Every group at 1.0 left the plot a square with its points along the top edge."""
    everyone = draw("success_vs_or", plot_table([(0.0, 1.0), (0.45, 1.0), (0.43, 1.0)]), ("model",))
    spread = draw("success_vs_or", plot_table([(0.0, 0.2), (0.45, 1.0)]), ("model",))
    low, high = everyone.axes[0].get_ylim()
    assert low <= 0.95 and high >= 1.05 and high - low < 0.25
    assert everyone.get_figheight() < spread.get_figheight() / 1.5 and spread.axes[0].get_ylim()[0] < 0.15


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_report_progress_shows_on_a_terminal_only(runs, capsys, monkeypatch):
    batch = load_batch([runs])
    assert capsys.readouterr().err == ""  # no terminal, and a report has no --progress
    assert [s["session"] for s in batch.sessions] == ["s1", "s2", "s3", "s4", "s5", "s6"]
    monkeypatch.setattr(sys, "stderr", Terminal())
    load_batch([runs])
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", sys.stderr.getvalue())  # without the colours
    assert "spillage: report" in shown and "9/9 sessions" in shown and "ETA" in shown
    before = sys.stderr.getvalue()
    load_batch([runs], bar=False)
    assert sys.stderr.getvalue() == before  # --quiet: not even on a terminal


@pytest.mark.parametrize("args, message", [
    (["--compare", "prompt=original", "model=x"], "both sides must select on the same key"),
    (["--compare", "colour=red", "colour=blue"], "expected KEY=VALUE"),
    (["--compare", "prompt=original", "prompt=nothing"], "no included session has prompt=nothing"),
    (["--by", "framework,planet"], "keys must be among"),
])
def test_bad_options_are_one_line_and_exit_2(runs, tmp_path, capsys, args, message):
    assert main(["report", str(runs), "--out", str(tmp_path / "out"), "--quiet", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_no_reportable_session_is_an_error(tmp_path, capsys):
    write_audited_session(tmp_path, "only").joinpath("audit.json").unlink()
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    assert "no session to report: only: no audit.json" in capsys.readouterr().err


def test_a_real_audit_is_read_with_its_own_numbers(tmp_path, catalog_file):
    from audit_helpers import Traffic, search_url

    from spillage.audit.session_audit import audit_session, write_report

    t = Traffic(tmp_path / "runs" / "real", catalog=catalog_file)
    t.load(search_url("kettle pregnant pittsburgh"))
    folder = t.close()
    audit = audit_session(folder)
    write_report(folder, audit, tmp_path / "home")
    (folder / "meta.json").write_text(json.dumps({"agent": {"framework": "command", "model": None, "label": "cmd"},
                                                  "condition": {"prompt": "sanitized", "system_note": "be brief"}}))
    batch = load_batch([tmp_path / "runs"], bar=False, include_unverified=True)   # Traffic's log is unsigned
    (session,) = batch.sessions
    summary = audit["summary"]
    assert session["verified"] is False
    assert (session["framework"], session["model"], session["site"], session["style"], session["prompt"],
            session["note"]) == ("command", "cmd", "shop.test", "chat", "sanitized", "be brief")
    assert session["actions"] == summary["actions"] and session["C_E"] == summary["occurrences"]["C_E"] == 2
    assert session["recovered"] == audit["recoveries"]["recovered"] == 2
    assert len(batch.events) == 2 and {e["attribute"] for e in batch.events} == set(summary["leaked_attributes"])


def test_two_batches_of_one_matrix_are_told_apart_and_compared(tmp_path):
    for side, prompt, leaks in (("a", "original", 3), ("b", "sanitized", 1)):
        for n in range(2):
            write_audited_session(tmp_path / side, f"cell-r{n}", prompt=prompt, occurrences={"C_E": leaks + n})
    batch = load_batch([tmp_path / "a", tmp_path / "b"], bar=False)
    assert sorted(s["session"] for s in batch.sessions) == sorted(
        str(tmp_path / side / f"cell-r{n}") for side in "ab" for n in range(2))
    out = tmp_path / "out"
    assert main(["report", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out), "--quiet",
                 "--compare", "prompt=original", "prompt=sanitized"]) == 0
    compared = pd.read_csv(out / "compare.csv")
    assert compared[compared.metric == "or_C_E"].iloc[0].difference == pytest.approx((3 - 7) / 20)


def test_compare_without_a_common_group_says_so(tmp_path):
    write_audited_session(tmp_path, "a", model="scripted:a", site="shop.test")
    write_audited_session(tmp_path, "b", model="scripted:b", site="bazaar.test")
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "out"), "--quiet", "--by", "framework,site,style",
                 "--compare", "model=scripted:a", "model=scripted:b"]) == 0
    md = (tmp_path / "out" / "report.md").read_text()
    assert ("No group has sessions on both sides: browser-use / bazaar.test / chat only with model=scripted:b; "
            "browser-use / shop.test / chat only with model=scripted:a.") in md


def test_a_folder_planted_under_another_sessions_name_is_left_out_and_says_why(runs, tmp_path):
    import shutil

    from capture_helpers import runner_session
    from spillage.proxy.signing import load_or_create_key

    shutil.copytree(runs / "s1", runs / "x-planted")   # a clean session's files, audit.json and all
    signed = runner_session(tmp_path / "clean", load_or_create_key(tmp_path / "home")).session
    planted = write_audited_session(runs, "x-signed-planted", **keys(G1))
    for name in ("capture.jsonl", "meta.json"):
        shutil.copy(tmp_path / "clean" / name, planted / name)
    excluded = dict(load_batch([runs], bar=False).excluded)
    assert excluded["x-planted"] == ("its signed name, signer and meta.json disagree: these are the files of "
                                     "session s1 (the name its key is certified for), not of x-planted")
    assert excluded["x-signed-planted"] == ("its signed name, signer and meta.json disagree: these are the files of "
                                            f"session {signed} (the name its key is certified for), not of x-signed-planted")


def test_a_tampered_session_is_excluded_with_advice_that_works(tmp_path, capsys):
    """A tampered session with no audit.json: the advice `report` gives audits it, and the report counts it."""
    import shutil

    session = tmp_path / "runs" / "s01-kettle-oversharer"
    shutil.copytree(CORPUS / "s01-kettle-oversharer", session)
    log = session / "capture.jsonl"
    log.write_bytes(log.read_bytes().replace(b"kettle", b"kettlf", 1))
    assert main(["report", str(session.parent), "--out", str(tmp_path / "a")]) == 2   # nothing to report
    advice = re.search(r"`(spillage audit [^`]+)`", capsys.readouterr().err).group(1)
    assert main(advice.split()[1:]) == 0
    table, md = report(session.parent, tmp_path / "b", "--include-unverified")
    assert "1 sessions, 0 excluded" in md


def test_a_proxy_start_session_audited_with_a_scenario_is_reported(tmp_path):
    """A session without its scenario copy (as `proxy start` leaves one run without --scenario), audited
    with --scenario: the report groups it by that scenario's style."""
    import shutil

    session = tmp_path / "runs" / "s01-kettle-oversharer"
    shutil.copytree(CORPUS / "s01-kettle-oversharer", session)
    (session / "scenario.yaml").unlink()
    assert main(["audit", str(session), "--scenario", "shop-kettle-chat", "--judge", "lexical"]) == 0
    table, md = report(session.parent, tmp_path / "out", "--include-unverified")   # the corpus's logs are unsigned
    assert list(table["style"]) == ["chat"] and "1 sessions, 0 excluded" in md


def test_by_default_a_report_groups_by_the_conditions_that_vary(tmp_path, capsys):
    """A smoke-like batch (2 scenarios × 2 frameworks × 2 models): four groups of two sessions, each with a
    CI, pooled over the scenarios; a batch where nothing varies but the scenario is one group."""
    runs = tmp_path / "runs"
    for framework, model, site in itertools.product(("browser-use", "autogen"), ("scripted:a", "scripted:b"),
                                                    ("shop.test", "bazaar.test")):
        write_audited_session(runs, f"{framework}-{model}-{site}", framework=framework, model=model, site=site,
                              actions=10 if site == "shop.test" else 20, occurrences={"C_E": 2})
    assert main(["report", str(runs), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    assert "grouped by framework, model (what varies among them" in capsys.readouterr().err
    table = pd.read_csv(tmp_path / "out" / "tables.csv")
    assert len(table) == 4 and set(table["sessions"]) == {2} and not table["or_all_low"].isna().any()
    one = tmp_path / "one"
    for site in ("shop.test", "bazaar.test"):
        write_audited_session(one, site, site=site)
    assert main(["report", str(one), "--out", str(tmp_path / "out1"), "--quiet"]) == 0
    assert len(pd.read_csv(tmp_path / "out1" / "tables.csv")) == 1
