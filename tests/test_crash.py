"""Crashes leave evidence that says what happened (docs/EVIDENCE.md, "Crashes").

kill -9 of the proxy, of the runner, or of both, while an agent sends requests as fast as it can:
every request the agent saw answered is in the log, the log verifies up to its last whole record,
a crashed log is sealed as such (by the runner, or by `spillage seal`) and never reads clean, a log
whose runner was killed is sealed by its proxy but never cosigned, and no origins server or proxy
outlives a killed runner or `spillage proxy start`."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from run_helpers import SPILLAGE
from run_helpers import spillage
from run_helpers import start_proxy

from spillage.proxy.capturelog import iter_records
from spillage.proxy.layout import work_folder

pytestmark = pytest.mark.e2e

# Three loops at once (load), each numbering its requests; each answered one is printed with its status.
AGENT = r"""
loop() { i=0; while [ $i -lt 2000 ]; do i=$((i+1))
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --proxy "$SPILLAGE_PROXY" "http://shop.test/s?k=$1$i")
  [ "$code" = 000 ] && break; echo "$code $1$i"; done; }
loop a & loop b & loop c & wait
"""


@pytest.fixture
def workdir(tmp_path) -> Path:
    return tmp_path


def start_run(workdir: Path) -> tuple[subprocess.Popen, Path]:
    run = subprocess.Popen([*SPILLAGE, "run", "--scenario", "shop-kettle-chat", "--", "sh", "-c", AGENT],
                           cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    session = None
    for line in run.stderr:
        session = session or (Path(line.split()[-1]) if line.startswith("spillage: session ") else None)
        if line.startswith("spillage: proxy on "):   # the sandboxed agent started before: it waited for this
            break
    time.sleep(1.5)  # requests flowing, a checkpoint or two reported
    return run, session


def pids(pattern: str) -> list[int]:
    found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()
    return [int(p) for p in found]


def proxy_pid(session: Path) -> int:
    (pid,) = pids(f"mitmdump.*spillage_session={session}")
    return pid


def gone(session: Path, timeout: float = 15) -> bool:
    """True once no origins server or proxy of `session` is left (within `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pids(f"mitmdump.*{session}") and not pids(f"spillage.origins.server.*{session}"):
            return True
        time.sleep(0.2)
    return False


def answered_but_missing(session: Path) -> tuple[int, list[str]]:
    """How many requests the agent saw answered, and those whose answer is not in the log."""
    seen = [line.split()[1] for line in (work_folder(session) / "agent.stdout").read_text().splitlines()
            if line.startswith("200 ")]
    records = [line.record for line in iter_records(session) if line.record["kind"] in ("request", "response")]
    requests = {r["seq"]: r["url"].rsplit("=", 1)[-1] for r in records if r["kind"] == "request"}
    answered = {requests[r["request"]] for r in records if r["kind"] == "response" and r["status"] == 200}
    return len(seen), [k for k in seen if k not in answered]


@pytest.mark.parametrize("trial", range(3))
def test_a_proxy_killed_mid_run_leaves_every_answer_and_a_crash_seal(workdir, trial):
    run, session = start_run(workdir)
    os.kill(proxy_pid(session), signal.SIGKILL)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 1, err
    assert "evidence sealed after crash" in err
    seen, missing = answered_but_missing(session)
    assert seen > 20 and missing == []
    verified = spillage(workdir, "verify", str(session))
    assert verified.returncode == 1 and "truncated, sealed after crash" in verified.stdout
    assert "sealed by tool spillage run" in verified.stdout
    meta = json.loads((session / "meta.json").read_text())
    assert meta["evidence"] == "sealed after crash" and meta["proxy"]["exit"] == -9
    assert gone(session)


def test_a_killed_runner_leaves_no_server_and_a_log_the_proxy_sealed(workdir):
    run, session = start_run(workdir)
    run.kill()
    run.wait()
    assert gone(session), "the origins server or the proxy outlived the runner"
    seen, missing = answered_but_missing(session)
    assert seen > 20 and missing == []
    records = [line.record for line in iter_records(session)]
    assert [r["kind"] for r in records[-2:]] == ["session_end", "checkpoint"]
    verified = spillage(workdir, "verify", str(session))   # sealed by the proxy, but no one checked it
    assert verified.returncode == 1 and ": not cosigned: checkpoint.note is missing" in verified.stdout


def test_both_killed_then_sealed_by_hand(workdir):
    run, session = start_run(workdir)
    os.kill(proxy_pid(session), signal.SIGKILL)
    run.kill()
    run.wait()
    assert gone(session)
    before = spillage(workdir, "verify", str(session))
    assert before.returncode == 1 and re.search(r": (truncated|torn last line): ", before.stdout)
    sealed = spillage(workdir, "seal", str(session))
    assert sealed.returncode == 0, sealed.stderr
    after = spillage(workdir, "verify", str(session))
    assert after.returncode == 1 and "truncated, sealed after crash" in after.stdout
    assert "sealed by tool spillage seal" in after.stdout
    seen, missing = answered_but_missing(session)
    assert seen > 20 and missing == []
    meta = json.loads((session / "meta.json").read_text())   # what the runner wrote before it was killed
    (session / "meta.json").write_text(json.dumps({**meta, "scenario": "someone-else"}))
    relabelled = spillage(workdir, "verify", str(session))
    assert relabelled.returncode == 1 and "meta.json was relabelled" in relabelled.stdout


def test_proxy_start_says_at_once_when_its_proxy_dies(workdir):
    proxy, shown = start_proxy(workdir)
    session = Path(shown["session"])
    killed = time.monotonic()
    os.kill(proxy_pid(session), signal.SIGKILL)
    for line in proxy.stderr:
        if "exited with" in line:
            break
    assert "the proxy (mitmdump) exited with -9" in line and time.monotonic() - killed < 5
    proxy.wait(60)
    assert proxy.returncode == 1
    assert "evidence sealed after crash" in proxy.stderr.read()
    assert "truncated, sealed after crash" in spillage(workdir, "verify", str(session)).stdout
    assert gone(session)


def test_proxy_start_whose_proxy_died_mid_record_says_so_and_moves_the_torn_tail_aside(workdir):
    proxy, shown = start_proxy(workdir)
    session = Path(shown["session"])
    mitmdump = proxy_pid(session)
    os.kill(mitmdump, signal.SIGSTOP)   # between two writes: then a record cut off halfway, as a crash leaves it
    with open(session / "capture.jsonl", "ab") as log:
        log.write(b'{"v":2,"seq":99,"ts":"2026-12-01T00:00:00Z","kind":"req')
    os.kill(mitmdump, signal.SIGKILL)
    proxy.wait(60)
    err = proxy.stderr.read()
    assert proxy.returncode == 1, err
    assert "the proxy (mitmdump) exited with -9" in err and "evidence sealed after crash" in err
    assert (session / "capture.torn").read_bytes().endswith(b'"kind":"req')
    verified = spillage(workdir, "verify", str(session))
    assert verified.returncode == 1 and "truncated, sealed after crash" in verified.stdout
    assert gone(session)


def test_a_killed_proxy_start_leaves_no_server_behind(workdir):
    proxy, shown = start_proxy(workdir)
    proxy.kill()
    proxy.wait()
    session = Path(shown["session"])
    assert gone(session)
    verified = spillage(workdir, "verify", str(session))
    assert verified.returncode == 1 and ": not cosigned: " in verified.stdout
