"""A session is opened once: `spillage inspect` verifies the log once and reads it once, with or without
an audit.json, for the terminal and for the page; the audit and the timeline share what was read."""

import builtins
import io
import sys
from pathlib import Path

import pytest
from audit_helpers import SHOP, Traffic, search_url
from capture_helpers import NOW

from spillage.audit.open_session import AuditError
from spillage.audit.open_session import open_session
from spillage.audit.session_audit import audit_opened
from spillage.audit.session_audit import audit_session
from spillage.audit.session_audit import write_report
from spillage.proxy.layout import LOG_NAME
from spillage.proxy.layout import REPORT_NAME
from spillage.proxy.layout import SCENARIO_COPY
from spillage.proxy.signing import SessionKey
from spillage.proxy.signing import load_or_create_key
from spillage.proxy.verify import verify
from spillage.runner.cli import main


class LogReads:
    """While entered: how many times verify() ran, and how many times capture.jsonl was opened by
    anything but verify() (whatever name the opener imported either by)."""

    def __init__(self, monkeypatch):
        self.verifies = self.reads = self.depth = 0
        real_open = builtins.open

        def counting_open(file, *args, **kwargs):
            if self.depth == 0 and isinstance(file, (str, Path)) and Path(file).name == LOG_NAME:
                self.reads += 1
            return real_open(file, *args, **kwargs)

        monkeypatch.setattr(builtins, "open", counting_open)
        monkeypatch.setattr(io, "open", counting_open)   # pathlib's

    def profile(self, frame, event, arg):
        if frame.f_code is verify.__code__:
            if event == "call":
                self.verifies += 1
                self.depth += 1
            elif event == "return":
                self.depth -= 1

    def __enter__(self):
        sys.setprofile(self.profile)
        return self

    def __exit__(self, *exc):
        sys.setprofile(None)


@pytest.fixture
def signed(tmp_path, catalog_file):
    """A signed session with a leak its proofs can show."""
    folder = tmp_path / "session"
    t = Traffic(folder, catalog=catalog_file, signing=SessionKey.issue(load_or_create_key(tmp_path / "home"),
                                                                        folder.name, NOW))
    t.load(f"{SHOP}/")
    t.load(search_url("kettle pregnant"))
    t.beacon("field", page=t.page, name="k", value="kettle pregnant")
    return t.close()


@pytest.mark.parametrize("audited", [True, False], ids=["audit.json", "audited now"])
@pytest.mark.parametrize("html", [False, True], ids=["text", "html"])
def test_inspect_verifies_once_and_reads_the_log_once(signed, tmp_path, monkeypatch, capsys, audited, html):
    if audited:
        write_report(signed, audit_session(signed))
    page = tmp_path / "inspect.html"
    with LogReads(monkeypatch) as counted:
        assert main(["inspect", str(signed), *(["--html", str(page)] if html else [])]) == 0
    assert (counted.verifies, counted.reads) == (1, 1)
    shown = page.read_text() if html else capsys.readouterr().out
    assert "pregnant" in shown and ("a class='download'" in shown) == html   # the proofs came from that reading


def test_the_counter_sees_a_second_reading(signed, monkeypatch):
    with LogReads(monkeypatch) as counted:
        audit_session(signed)
        verify(signed)
    assert (counted.verifies, counted.reads) == (2, 1)


def test_an_opened_session_is_audited_as_its_folder_is(signed):
    session = open_session(signed, keep_lines=True)
    assert audit_opened(session) == audit_session(signed)
    assert audit_opened(session) == audit_session(signed)   # its kept lines replay


def test_an_opened_session_reads_its_scenario_only_when_asked(signed, tmp_path):
    (signed / SCENARIO_COPY).unlink()
    session = open_session(signed)   # inspecting an audited session needs no scenario
    assert session.check.ok
    with pytest.raises(AuditError, match="no scenario; pass --scenario"):
        session.scenario
    with pytest.raises(AuditError, match="no capture.jsonl here"):
        open_session(tmp_path)
    assert (signed / REPORT_NAME).exists() is False
