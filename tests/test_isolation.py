"""The agent cannot reach the evidence of its own session (docs/EVIDENCE.md, "Isolation").

A hostile agent (tests/agents/hostile.py) tries every attack of issue 25: the signing key and the CA key
in the spillage home, the proxy's and the runner's memory, tracing the proxy, the proxy's stdout pipe and
the runner's end of it, the session folder, a listener past the proxy, and a child that outlives it to
rewrite the log after the seal. In the sandbox (the default) it runs as the agent itself, from the
Chromium that browser-use and AutoGen start, and as another user: every attack fails, no process of it is
left, and the session verifies clean. Without a sandbox, as the runner's uid without privilege, only the
undumpable processes hold: the test says which attacks then succeed, as the docs do."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from run_helpers import SPILLAGE
from run_helpers import spillage

from spillage.proxy.capturelog import iter_records
from spillage.proxy.layout import work_folder
from spillage.proxy.settings import AGENT_FAILED
from spillage.proxy.signing import fingerprint
from spillage.proxy.signing import load_or_create_key
from spillage.proxy.signing import raw_public

pytestmark = [pytest.mark.e2e, pytest.mark.needs_tool("bwrap")]
SCENARIO_ID = "shop-kettle-chat"
AGENTS = Path(__file__).with_name("agents")
HOSTILE = AGENTS / "hostile.py"
ATTACKS = ("read the signing key", "read the CA key", "read the proxy's memory", "read the runner's memory",
           "trace the proxy", "write into the proxy's stdout pipe", "open the runner's end of the pipe",
           "write into the session folder", "reach a listener past the proxy", "leave a child behind")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="only root can run the agent as another user")


class Listener:
    """A TCP listener on loopback that counts the connections it gets: what the agent must not reach."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.connections = 0
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    @property
    def address(self) -> str:
        return "127.0.0.1:%d" % self.sock.getsockname()[1]


@pytest.fixture
def listener():
    found = Listener()
    yield found
    found.sock.close()


@pytest.fixture
def workdir(tmp_path) -> Path:
    (tmp_path / "home").mkdir()
    return tmp_path


def hostile_run(workdir: Path, listener: Listener, *args: str, chromium: bool = False):
    """`spillage run` with a hostile agent: (the finished process, the session, the attacks' report, the
    marker of the child it left)."""
    marker = f"hostile-{secrets.token_hex(4)}"
    env = {"SPILLAGE_HOSTILE_TARGET": listener.address, "SPILLAGE_HOSTILE_MARKER": marker}
    if chromium:
        env["SPILLAGE_CHROMIUM"] = str(AGENTS / "hostile_chromium.sh")
    done, session = run_in(workdir, env, *args)
    report = (work_folder(session) / "hostile.txt").read_text().splitlines()
    return done, session, report, marker


def run_in(workdir: Path, env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess, Path]:
    """`spillage run` with the home `workdir`/home, which the agent finds in $SPILLAGE_HOSTILE_HOME, and `env`
    besides: the finished process and the session. A run that hangs fails the test."""
    env = {**os.environ, "SPILLAGE_HOSTILE_HOME": str(workdir / "home"), **env}
    done = subprocess.run([*SPILLAGE, "--home", str(workdir / "home"), "run", "--scenario", SCENARIO_ID, *args],
                          cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    return done, Path(done.stdout.strip().splitlines()[-1])


def outcomes(report: list[str]) -> dict[str, str]:
    """Each attack and how it went: DID or refused (the first time it was tried)."""
    found = {}
    for line in report:
        verdict, _, rest = line.partition(": ")
        if verdict in ("DID", "refused"):
            found.setdefault(rest.split(" (")[0].split(": ")[0], verdict)
    return found


def left_behind(marker: str) -> list[str]:
    return subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()


def assert_clean(workdir: Path, session: Path) -> None:
    """The session is sealed by the proxy and verifies with the home's key pinned."""
    pin = fingerprint(raw_public(load_or_create_key(workdir / "home")))
    verified = spillage(workdir, "verify", str(session), "--key", pin)
    assert verified.returncode == 0, verified.stdout
    assert "cosigned by its issuer; agent isolation: sandbox" in verified.stdout
    assert json.loads((session / "meta.json").read_text())["evidence"] == "sealed"


@pytest.mark.parametrize("path", ["command", "browser-use", pytest.param("autogen", marks=pytest.mark.needs_tool("autogen")),
                                  pytest.param("command as nobody", marks=needs_root)])
def test_a_hostile_agent_reaches_nothing_in_the_sandbox(workdir, listener, path):
    if path.startswith("command"):
        agent = ["--agent-user", "nobody"] if path.endswith("nobody") else []
        done, session, report, marker = hostile_run(workdir, listener, *agent, "--", sys.executable, str(HOSTILE),
                                                    "command")
    else:
        done, session, report, marker = hostile_run(workdir, listener, "--agent", path, "--model", "scripted:minimal",
                                                    chromium=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert report[0].startswith("from: " + ("command" if path.startswith("command") else "browser"))
    held = "refused" if path.endswith("nobody") else "DID"   # bubblewrap's first process is root's
    assert outcomes(report) == ({attack: "refused" for attack in ATTACKS[:-1]} | {ATTACKS[-1]: "DID"}
                                | {"hold the sandbox's first process": held})
    assert "linger: started" in report and not any("rewrite" in line for line in report)
    assert left_behind(marker) == []   # the child died with the sandbox, before the seal
    assert listener.connections == 0
    assert_clean(workdir, session)
    assert any(r["kind"] == "request" for r in (line.record for line in iter_records(session)))


@pytest.mark.parametrize("planted", ["fifo", "devzero", "key"])
def test_what_an_agent_leaves_under_the_names_the_runner_reads_is_refused_not_followed(workdir, planted):
    """agent.stderr and outcome.json replaced by a FIFO, a link to /dev/zero or to the signing key: the run
    ends (no read blocks or runs unbounded), its last error line is the one it wrote to the stderr the runner
    opened, nothing of the key reaches meta.json, and what it planted is said."""
    done, session = run_in(workdir, {}, "--", sys.executable, str(AGENTS / "planter.py"), planted)
    assert done.returncode == AGENT_FAILED, done.stderr[-3000:]
    meta_text = (session / "meta.json").read_text()
    meta = json.loads(meta_text)
    assert meta["agent_exit"] == 1 and meta["agent_last_error"] == "planter: the last line it said"
    kind = "a FIFO" if planted == "fifo" else "a symbolic link"
    assert meta["agent_files_refused"] == [
        f"agent.stderr was replaced by the agent with {kind}; read from the file the runner opened",
        f"outcome.json is {kind}, not a file: not read"]
    key_lines = (workdir / "home" / "signing" / "ed25519.pem").read_text().splitlines()
    assert not any(line in meta_text for line in key_lines if "-----" not in line)
    assert_clean(workdir, session)


def test_without_a_sandbox_only_the_undumpable_processes_hold(workdir, listener):
    """--isolation none, the agent as the runner's uid without privilege (a root runner's agent with every
    capability dropped): it reads the keys and writes into the session (which the runner then finds
    tampered), but cannot read or trace the proxy or the runner, nor reach their pipe."""
    cap_less = ["bwrap", "--bind", "/", "/", "--dev-bind", "/dev", "/dev", "--cap-drop", "ALL", "--"]
    done, session, report, marker = hostile_run(workdir, listener, "--isolation", "none", "--", *cap_less,
                                                sys.executable, str(HOSTILE), "command")
    assert "isolation: none: the agent runs as uid" in done.stderr
    found = outcomes(report)
    assert {a: found[a] for a in ATTACKS} == {
        "read the signing key": "DID", "read the CA key": "DID", "read the proxy's memory": "refused",
        "read the runner's memory": "refused", "trace the proxy": "refused",
        "write into the proxy's stdout pipe": "refused", "open the runner's end of the pipe": "refused",
        "write into the session folder": "DID", "reach a listener past the proxy": "DID",
        "leave a child behind": "DID"}
    assert done.returncode == 1 and "evidence tampered" in done.stderr
    meta = json.loads((session / "meta.json").read_text())
    assert meta["isolation"]["level"] == "none" and meta["evidence"] == "tampered"
    verified = spillage(workdir, "verify", str(session))
    assert verified.returncode == 1 and "tampered" in verified.stdout
    for pid in left_behind(marker):   # the child outlived the run: nothing ends it without a sandbox
        os.kill(int(pid), 9)


@pytest.mark.parametrize("how", ["replace", "edit"])
def test_without_a_sandbox_a_log_forged_during_the_run_is_caught_by_the_runner(workdir, how, monkeypatch):
    monkeypatch.setenv("SPILLAGE_HOME", str(workdir / "home"))  # the forger reads the real key from here
    done = spillage(workdir, "run", "--scenario", SCENARIO_ID, "--isolation", "none", "--", sys.executable,
                    str(AGENTS / "forger.py"), how)
    session = Path(done.stdout.strip().splitlines()[-1])
    assert (work_folder(session) / "agent.stdout").read_text().strip() == ("replaced" if how == "replace" else "edited")
    assert done.returncode == 1, done.stderr
    assert "evidence tampered" in done.stderr
    meta = json.loads((session / "meta.json").read_text())
    assert meta["evidence"] == "tampered" and meta["tampered"]
    verified = spillage(workdir, "verify", str(session))
    assert verified.returncode == 1 and "tampered" in verified.stdout


def test_where_no_sandbox_can_be_made_the_run_refuses_unless_told_isolation_none(workdir):
    env = {**os.environ, "PATH": str(workdir / "no-tools-here")}   # no bubblewrap on PATH
    argv = [*SPILLAGE, "run", "--scenario", SCENARIO_ID, "--", sys.executable, "-c", "pass"]
    refused = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2
    assert refused.stderr.startswith("spillage: no sandbox for the agent: bubblewrap is not installed")
    assert not (workdir / "runs").exists()
    done = subprocess.run([*argv[:6], "--isolation", "none", *argv[6:]], cwd=workdir, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "spillage: isolation: none: the agent runs as uid" in done.stderr
    session = Path(done.stdout.strip().splitlines()[-1])
    assert json.loads((session / "meta.json").read_text())["isolation"]["level"] == "none"
    verified = spillage(workdir, "verify", str(session))
    assert verified.returncode == 0 and verified.stdout.rstrip().endswith(
        "; agent isolation: none (the agent could reach the keys and the session folder while it ran)")


@needs_root
def test_without_a_sandbox_an_agent_user_that_cannot_run_the_agent_is_refused_before_anything_starts(workdir):
    done = spillage(workdir, "run", "--scenario", SCENARIO_ID, "--isolation", "none", "--agent-user", "nobody",
                    "--model", "scripted:minimal")
    assert done.returncode == 2
    assert done.stderr.startswith("spillage: --agent-user nobody cannot run ")
    assert not (workdir / "runs").exists() or not any((workdir / "runs").iterdir())


def test_agent_user_needs_root_and_a_real_user(workdir):
    done = spillage(workdir, "run", "--scenario", SCENARIO_ID, "--agent-user", "no-such-user-here", "--", "true")
    assert done.returncode == 2
    expected = ("no such user" if os.geteuid() == 0 else "only root can run the agent as another user")
    assert expected in done.stderr


def test_an_agent_inside_the_spillage_home_is_refused_before_anything_starts(workdir):
    script = workdir / "home" / "agent.py"
    script.write_text("print('never')\n")
    done = spillage(workdir, "--home", str(workdir / "home"), "run", "--scenario", SCENARIO_ID, "--",
                    sys.executable, str(script))
    assert done.returncode == 2
    assert done.stderr.strip() == (f"spillage: the agent's {workdir / 'home'} is inside {workdir / 'home'}, which the "
                                   "sandbox hides from it; move it elsewhere")
    assert not (workdir / "runs").exists()


def test_an_argument_that_reaches_the_spillage_home_through_a_link_is_refused_before_anything_starts(workdir):
    load_or_create_key(workdir / "home")
    (workdir / "expose").symlink_to(workdir / "home" / "signing")
    done = spillage(workdir, "--home", str(workdir / "home"), "run", "--scenario", SCENARIO_ID, "--",
                    sys.executable, "-c", "pass", str(workdir / "expose" / "ed25519.pub.pem"))
    assert done.returncode == 2
    assert done.stderr.strip() == (f"spillage: the agent's {workdir / 'expose'} (that is {workdir / 'home' / 'signing'}) "
                                   f"is inside {workdir / 'home'}, which the sandbox hides from it; move it elsewhere")
    assert not (workdir / "runs").exists()


def test_the_home_and_the_runs_below_a_linked_argument_are_covered_where_the_link_shows_them(workdir):
    """An argument through a link to the folder holding the home and the runs folder: the agent sees that
    folder by the link's name, with the home and the sessions empty."""
    load_or_create_key(workdir / "home")
    (workdir / "up").symlink_to(workdir)
    (workdir / "task.txt").write_text("the task\n")
    look = ("import os, sys; up = os.path.dirname(sys.argv[1]); "
            "print(open(sys.argv[1]).read().strip(), os.listdir(up + '/home'), os.listdir(up + '/runs'))")
    done = spillage(workdir, "--home", str(workdir / "home"), "run", "--scenario", SCENARIO_ID, "--",
                    sys.executable, "-c", look, str(workdir / "up" / "task.txt"))
    assert done.returncode == 0, done.stderr[-3000:]
    session = Path(done.stdout.strip().splitlines()[-1])
    assert (work_folder(session) / "agent.stdout").read_text() == "the task [] []\n"
    assert_clean(workdir, session)


def test_an_argument_that_names_the_machines_own_run_by_a_link_is_refused(workdir):
    """/run (the machine's sockets) by another name would be bound as it is, beside the sandbox's own."""
    (workdir / "sockets").symlink_to("/run")
    done = spillage(workdir, "run", "--scenario", SCENARIO_ID, "--", "ls", str(workdir / "sockets"))
    assert done.returncode == 2
    assert done.stderr.startswith(f"spillage: the agent's {workdir / 'sockets'} (that is /run) is or holds the "
                                  "machine's own /dev, /proc, /sys, /run, /etc")
