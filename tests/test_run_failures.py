"""`spillage run` when its servers cannot start: one line that says why, an honest meta.json."""

import json
import sys

import pytest

import spillage.runner.session_run as session_run
import spillage.runner.stack as stack
from spillage.runner.cli import main


def run(tmp_path) -> int:
    return main(["--home", str(tmp_path / "home"), "run", "--scenario", "shop-kettle-chat", "--no-preflight",
                 "--runs-dir", str(tmp_path / "runs"), "--session-name", "s"])


def meta(tmp_path) -> dict:
    return json.loads((tmp_path / "runs" / "s" / "meta.json").read_text())


def test_sites_that_do_not_start_end_the_run_with_their_own_words(tmp_path, monkeypatch, capsys):
    failing = [sys.executable, "-c", "print('bind: Address already in use', flush=True); raise SystemExit(1)"]
    monkeypatch.setattr(stack, "origins_command", lambda catalog, built=False, fd=None, access_log=None: failing)
    assert run(tmp_path) == 3
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "origins exited with 1 before it was ready" in last and "Address already in use" in last
    assert str(tmp_path / "runs" / "s" / "origins.log") in last
    written = meta(tmp_path)
    assert written["status"] == "not run" and written["evidence"] == "none"
    assert "Address already in use" in written["status_detail"]


def test_an_unforeseen_error_before_the_agent_is_not_recorded_as_an_interruption(tmp_path, monkeypatch, capsys):
    def broken(*args, **kwargs):
        raise FileNotFoundError(2, "No such file or directory", "/nonexistent/catalog.sqlite")

    import tempfile

    monkeypatch.setattr(session_run, "stored_catalog", broken)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))   # the saved traceback lands here, not in /tmp
    assert run(tmp_path) == 70
    err = capsys.readouterr().err
    assert "internal error: FileNotFoundError" in err and "Traceback" not in err
    (saved,) = tmp_path.glob("spillage-crash-*.txt")
    assert str(saved) in err and "Traceback" in saved.read_text()
    written = meta(tmp_path)
    assert written["status"] == "not run" and written["status_detail"].startswith("FileNotFoundError")


def test_ctrl_c_while_the_session_folder_is_made_leaves_an_interrupted_meta_json(tmp_path, monkeypatch, capsys):
    """A batch passes Ctrl-C on to a child that may have just made its folder: the folder must still say
    what happened (it used to be left without meta.json, which the batch could not read)."""
    import os
    import signal

    made = session_run.create_work_folder

    def made_then_interrupted(session_dir):
        work = made(session_dir)
        os.kill(os.getpid(), signal.SIGINT)
        return work

    monkeypatch.setattr(session_run, "create_work_folder", made_then_interrupted)
    assert run(tmp_path) == 130
    assert "nothing was captured" in capsys.readouterr().err
    written = meta(tmp_path)
    assert (written["status"], written["evidence"]) == ("interrupted", "none")
    assert written["status_detail"] == "Ctrl-C before the agent started"
    assert not (tmp_path / "runs" / "s" / "capture.jsonl").exists()


@pytest.mark.parametrize("option, value", [("--timeout", "-1"), ("--timeout", "nan"), ("--timeout", "inf"),
                                           ("--max-steps", "0"), ("--max-steps", "-5")])
def test_run_refuses_limits_that_are_not_positive(tmp_path, capsys, option, value):
    with pytest.raises(SystemExit) as refused:   # argparse's own exit: usage error
        main(["--home", str(tmp_path / "home"), "run", "--scenario", "shop-kettle-chat", "--runs-dir",
              str(tmp_path / "runs"), option, value])
    assert refused.value.code == 2 and option in capsys.readouterr().err and not (tmp_path / "runs").exists()


def test_the_session_folder_name_carries_the_condition(tmp_path, monkeypatch, capsys):
    """`ls runs/` tells a redacting, sanitized, noted run from a plain one (the run stops before its servers)."""
    import tempfile

    def stop(*args, **kwargs):
        raise FileNotFoundError(2, "No such file or directory", "/nonexistent/catalog.sqlite")

    monkeypatch.setattr(session_run, "stored_catalog", stop)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for extra in ([], ["--guard", "redact", "--prompt", "sanitized", "--system-note", "Share only what it needs."],
                  ["--guard", "block", "--system-note", "Be brief."]):
        main(["--home", str(tmp_path / "home"), "run", "--scenario", "shop-kettle-chat", "--model",
              "scripted:minimal", "--runs-dir", str(tmp_path / "runs"), "--isolation", "none", *extra])
    names = sorted(p.name.split("-", 2)[2].rsplit("-", 1)[0] for p in (tmp_path / "runs").glob("2*"))
    assert names == ["shop-kettle-chat-browser-use-scripted-minimal",
                     "shop-kettle-chat-browser-use-scripted-minimal-guard-block-note-" + sha6("Be brief."),
                     "shop-kettle-chat-browser-use-scripted-minimal-guard-redact-sanitized-note-"
                     + sha6("Share only what it needs.")]


def sha6(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:6]
