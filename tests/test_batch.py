"""`spillage batch`: the ledger, how outcomes are read, and whole batches with real runs —
interrupted with Ctrl-C and resumed, a timed-out run recorded and retried."""

import io
import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from spillage.audit.progress import ProgressBar
from spillage.proxy.capturelog import iter_records
from spillage.proxy.verify import verify
from spillage.runner.batch import Attempt
from spillage.runner.batch import Ledger
from spillage.runner.batch import classify

SPILLAGE = [sys.executable, "-m", "spillage.runner.cli"]


# --- fast: the ledger and outcomes ---------------------------------------------------------------


def test_the_ledger_keeps_the_last_outcome_of_each_run_and_survives_a_torn_line(tmp_path):
    ledger = Ledger(tmp_path / "batch.jsonl")
    ledger.record(Attempt("a", "failed", "agent exited 1", "sessions/a", 3.0))
    ledger.record(Attempt("b", "done", "", "sessions/b", 20.0))
    ledger.record(Attempt("a", "done", "", "sessions/a", 21.0))
    with open(ledger.path, "a", encoding="utf-8") as f:
        f.write('{"key": "c", "outc')  # a crash mid-write
    states = ledger.states()
    assert {k: v["outcome"] for k, v in states.items()} == {"a": "done", "b": "done"}


def meta(tmp_path: Path, **fields) -> Path:
    session = tmp_path / "s"
    session.mkdir(exist_ok=True)
    base = {"status": "completed", "agent_exit": 0, "capture": {"records": 9, "head": "0" * 64}}
    (session / "meta.json").write_text(json.dumps({**base, **fields}), encoding="utf-8")
    (session / "audit.json").write_text("{}", encoding="utf-8")
    return session


@pytest.mark.parametrize("fields, outcome, reason", [
    ({}, "done", ""),
    ({"agent_exit": 3, "agent_outcome": {"stopped": "step limit", "detail": "50 steps", "steps": 50}}, "done",
     "the agent reached its step limit"),
    ({"agent_exit": 3, "agent_outcome": {"stopped": "model error", "detail": "APIConnectionError: Connection error.",
                                         "steps": 3}}, "failed", "model error: APIConnectionError: Connection error."),
    ({"agent_exit": 3}, "failed", "agent exited 3"),  # an exit 3 is no step limit unless the agent says so
    ({"agent_exit": 1, "agent_last_error": "KeyError: 'x'"}, "failed", "agent exited 1; its last error line: KeyError: 'x'"),
    ({"status": "timed out", "status_detail": "stopped after 300 s"}, "timed out", "stopped after 300 s"),
    ({"status": "failed to start", "status_detail": "python: not found"}, "failed",
     "agent failed to start: python: not found"),
    ({"status": "interrupted", "status_detail": "Ctrl-C"}, "interrupted", "Ctrl-C"),
    ({"capture": None, "capture_damage": "truncated at line 9"}, "failed", "capture damaged: truncated at line 9"),
])
def test_a_finished_run_is_classified_from_its_meta_json(tmp_path, fields, outcome, reason):
    session = meta(tmp_path, **fields)
    if fields.get("capture", "") is None:
        data = json.loads((session / "meta.json").read_text())
        del data["capture"]
        (session / "meta.json").write_text(json.dumps(data))
    assert classify(session, 0, True, False, tmp_path / "log") == (outcome, reason)


def test_a_run_without_a_session_or_an_audit_is_failed_with_the_childs_last_words(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("spillage: session folder exists already: x\n", encoding="utf-8")
    assert classify(tmp_path / "none", 2, True, False, log) == (
        "failed", "no session (exit 2): session folder exists already: x")
    session = meta(tmp_path)
    (session / "audit.json").unlink()
    log.write_text("spillage: scenario.yaml: broken\n", encoding="utf-8")
    assert classify(session, 2, True, False, log) == ("failed", "audit failed: scenario.yaml: broken")
    assert classify(session, 0, False, False, log) == ("done", "")


# --- end to end: real runs -------------------------------------------------------------------------


def needs_chromium() -> None:
    if not shutil.which("chromium"):
        pytest.fail("Debian's chromium is required for end-to-end tests: apt-get install -y chromium")


def ledger_lines(batch_dir: Path) -> list[dict]:
    path = batch_dir / "batch.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.endswith("}")]


@pytest.mark.e2e
def test_an_interrupted_batch_resumes_and_ends_with_every_session_complete_once(tmp_path):
    needs_chromium()
    matrix = tmp_path / "eight.yaml"
    matrix.write_text("""
name: eight
scenarios: [shop-kettle-chat, bazaar-film-camera-chat]
frameworks: [browser-use]
models: [scripted:minimal, scripted:oversharer]
conditions:
  - {name: original}
  - {name: sanitized, prompt: sanitized}
timeout: 240
""", encoding="utf-8")
    batch_dir = tmp_path / "out"
    command = [*SPILLAGE, "--home", str(tmp_path / "home"), "batch", str(matrix), "--jobs", "2",
               "--runs-dir", str(batch_dir)]
    first = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while sum(e["outcome"] == "done" for e in ledger_lines(batch_dir)) < 2:
        assert first.poll() is None, first.communicate()
        assert time.monotonic() < deadline, "no run finished in 300 s"
        time.sleep(0.5)
    first.send_signal(signal.SIGINT)
    out, err = first.communicate(timeout=180)
    assert first.returncode == 130, err[-2000:]
    assert "interrupted" in out and "not run" in out

    sessions = batch_dir / "sessions"
    attempts = batch_dir / "attempts"
    finished = sorted(p.name for p in sessions.iterdir() if not p.name.startswith("."))  # not .work/
    assert len(finished) >= 2
    retired = [a / a.name.rsplit(".", 1)[0] for a in attempts.iterdir()]   # attempts/<key>.<n>/<key>/
    for folder in [*(sessions / n for n in finished), *retired]:  # Ctrl-C leaves everything sealed
        meta = json.loads((folder / "meta.json").read_text())
        if meta["evidence"] == "none":  # interrupted before its proxy started: nothing was captured
            assert meta["status"] == "interrupted" and not (folder / "capture.jsonl").exists(), folder
        else:
            assert verify(folder).ok, folder
    assert all((sessions / name / "audit.json").exists() for name in finished)

    second = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert second.returncode == 0, second.stderr[-3000:]
    assert f"skipping {len(finished)} run(s) done before" in second.stderr
    assert re.search(r"^  done +8$", second.stdout, re.MULTILINE)

    names = sorted(p.name for p in sessions.iterdir() if not p.name.startswith("."))
    assert len(names) == 8 and set(finished) <= set(names)
    for name in names:
        assert verify(sessions / name).ok, name
        site = name.split("-")[0] + ".test"  # concurrent runs never mix: only this run's site and tracker
        hosts = {urlsplit(r.record["url"]).hostname for r in iter_records(sessions / name) if r.record["kind"] == "request"}
        assert hosts <= {site, "metrics.test"}, (name, hosts)
        report = json.loads((sessions / name / "audit.json").read_text(encoding="utf-8"))
        assert report["capture"]["verified"] and report["choices"]["task_success"], name
    done = [e["key"] for e in ledger_lines(batch_dir) if e["outcome"] == "done"]
    assert sorted(done) == names  # every cell done exactly once


@pytest.mark.e2e
def test_a_timed_out_run_is_recorded_skipped_on_resume_and_retried_on_request(tmp_path):
    needs_chromium()
    matrix = tmp_path / "slow.yaml"
    matrix.write_text("scenarios: [shop-kettle-chat]\nframeworks: [browser-use]\n"
                      "models: [scripted:scroller]\ntimeout: 2\n", encoding="utf-8")
    batch_dir = tmp_path / "out"
    command = [*SPILLAGE, "--home", str(tmp_path / "home"), "batch", str(matrix), "--runs-dir", str(batch_dir)]
    first = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert first.returncode == 3   # a run timed out: the agent failed
    assert re.search(r"^  timed out +1$", first.stdout, re.MULTILINE) and "stopped after 2 s" in first.stdout
    key = "shop-kettle-chat--browser-use--scripted-scroller--original--r1"
    assert verify(batch_dir / "sessions" / key).ok

    again = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert again.returncode == 3 and "skipping 1 run(s) timed out before" in again.stderr
    assert len(ledger_lines(batch_dir)) == 1

    retried = subprocess.run([*command, "--retry-failed"], cwd=tmp_path, capture_output=True, text=True,
                             timeout=300)
    assert retried.returncode == 3 and len(ledger_lines(batch_dir)) == 2
    assert verify(batch_dir / "attempts" / f"{key}.1" / key).ok  # the first attempt is kept, under its own name


def test_without_a_terminal_each_finished_run_is_a_line_with_the_eta_only_when_asked():
    asked, unasked = io.StringIO(), io.StringIO()
    for stream, wanted in ((asked, True), (unasked, False)):
        with ProgressBar(3, stream=stream, what="batch", unit="runs", lines=wanted) as bar:
            bar.step("done: a in 20 s")
            bar.step("failed: b (agent exited 1) in 3 s")
    lines = asked.getvalue().splitlines()
    assert [line.split(";")[0] for line in lines] == [
        "spillage: batch [1/3 runs] done: a in 20 s", "spillage: batch [2/3 runs] failed: b (agent exited 1) in 3 s"]
    assert all(re.search(r"; \d+ s, ETA \d+ s$", line) for line in lines) and "\r" not in asked.getvalue()
    assert unasked.getvalue() == ""  # no terminal, no --progress: nothing


def test_the_batch_status_says_whether_evidence_or_agents_failed():
    from types import SimpleNamespace

    from spillage.runner.batch import batch_status

    runs = [SimpleNamespace(key="a"), SimpleNamespace(key="b")]
    done = {"outcome": "done"}
    assert batch_status({"a": done, "b": done}, runs) == 0
    assert batch_status({"a": done, "b": {"outcome": "timed out", "reason": "stopped after 2 s"}}, runs) == 3
    assert batch_status({"a": done}, runs) == 3   # a run that has not run
    tampered = {"outcome": "failed", "reason": "evidence tampered: the log on disk differs"}
    assert batch_status({"a": tampered, "b": {"outcome": "failed", "reason": "agent exited 1"}}, runs) == 1
