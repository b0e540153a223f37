"""The agent cannot forge the evidence of its own session (docs/EVIDENCE.md, "Isolation").

Under the runner's own uid an agent can reach the session folder and even the signing key: whatever
it writes there, the log on disk is not what the proxy reported over its pipe, and the session is
marked tampered. Run as another user (`--agent-user`, root only) it cannot read, write, rename or
delete anything of the evidence or the keys, nor signal the proxy."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from run_helpers import spillage

from spillage.proxy.capturelog import iter_records
from spillage.proxy.layout import work_folder

pytestmark = pytest.mark.e2e
SCENARIO_ID = "shop-kettle-chat"
FORGER = Path(__file__).with_name("agents") / "forger.py"


@pytest.fixture
def workdir(tmp_path) -> Path:
    (tmp_path / "home").mkdir()
    return tmp_path


def run(workdir: Path, *args: str):
    env_home = ["--home", str(workdir / "home")]
    done = spillage(workdir, *env_home, "run", "--scenario", SCENARIO_ID, *args)
    return done, Path(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else None


@pytest.mark.parametrize("how", ["replace", "edit"])
def test_an_agent_of_the_same_user_cannot_forge_its_log(workdir, how, monkeypatch):
    monkeypatch.setenv("SPILLAGE_HOME", str(workdir / "home"))  # the forger reads the real key from here
    done, session = run(workdir, "--", sys.executable, str(FORGER), how)
    assert (work_folder(session) / "agent.stdout").read_text().strip() == ("replaced" if how == "replace" else "edited")
    assert done.returncode == 1, done.stderr
    assert "evidence tampered" in done.stderr
    meta = json.loads((session / "meta.json").read_text())
    assert meta["evidence"] == "tampered" and meta["tampered"]
    verified = spillage(workdir, "verify", str(session))
    assert verified.returncode == 1 and "tampered" in verified.stdout


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="only root can run the agent as another user")
HOSTILE = r"""
session="$(dirname "$(dirname "$SPILLAGE_WORK")")/$(basename "$SPILLAGE_WORK")"
curl -sS -o /dev/null --proxy "$SPILLAGE_PROXY" "http://shop.test/s?k=kettle"
try() { if "$@" 2>/dev/null; then echo "DID: $*"; else echo "refused: $*"; fi; }
try ls "$session"
try cat "$session/capture.jsonl"
try sh -c "echo forged >> '$session/capture.jsonl'"
try mv "$session/capture.jsonl" "$SPILLAGE_WORK/stolen"
try rm -f "$session/meta.json"
try cat "$HOME_OF_SPILLAGE/signing/ed25519.pem"
try kill -TERM $(pgrep -f "mitmdump.*$(basename "$session")")
try touch "$session/../planted"
id -u
"""


@pytest.fixture
def reachable():
    """A folder the agent user can reach (pytest's own temp folders are 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="spillage-isolation-"))
    folder.chmod(0o755)
    (folder / "home").mkdir()
    yield folder
    shutil.rmtree(folder)


@needs_root
def test_an_agent_of_another_user_cannot_touch_the_evidence(reachable, monkeypatch):
    workdir = reachable
    monkeypatch.setenv("HOME_OF_SPILLAGE", str(workdir / "home"))
    done, session = run(workdir, "--agent-user", "nobody", "--", "sh", "-c", HOSTILE)
    assert done.returncode == 0, done.stderr
    lines = (work_folder(session) / "agent.stdout").read_text().splitlines()
    assert lines[-1] == "65534"
    assert [line for line in lines[:-1] if not line.startswith("refused: ")] == []
    assert len(lines) == 9
    verified = spillage(workdir, "verify", str(session))
    assert verified.returncode == 0 and "signed by ed25519:" in verified.stdout
    meta = json.loads((session / "meta.json").read_text())
    assert meta["isolation"] == {"level": "user", "user": "nobody", "uid": 65534} and meta["evidence"] == "sealed"
    assert any(r["kind"] == "request" and r["url"] == "http://shop.test/s?k=kettle"
               for r in (line.record for line in iter_records(session)))


@needs_root
def test_an_agent_user_that_cannot_run_the_agent_is_refused_before_anything_starts(workdir):
    done, _ = run(workdir, "--agent-user", "nobody", "--model", "scripted:minimal")
    assert done.returncode == 2
    assert done.stderr.startswith("spillage: --agent-user nobody cannot run ")
    assert not (workdir / "runs").exists() or not any((workdir / "runs").iterdir())


def test_agent_user_needs_root_and_a_real_user(workdir):
    done, _ = run(workdir, "--agent-user", "no-such-user-here", "--", "true")
    assert done.returncode == 2
    expected = ("no such user" if os.geteuid() == 0 else "only root can run the agent as another user")
    assert expected in done.stderr
