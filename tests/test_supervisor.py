"""The runner's one process supervisor (runner/supervisor.py), on real processes: a child in its own
group, dying with its runner, stopped as a group; and the ready-line children built on it."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spillage.runner.children import Child
from spillage.runner.children import ChildError
from spillage.runner.supervisor import Supervisor

PY = sys.executable
IGNORE_TERM = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); "


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie no longer does)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def python(code: str, **popen) -> Supervisor:
    return Supervisor([PY, "-c", code], **popen)


def grandchild_code(then: str) -> str:
    """A child that starts a grandchild ignoring SIGTERM (in its group), prints the grandchild's pid once the
    grandchild ignores it, then `then`."""
    grandchild = IGNORE_TERM + "print(flush=True); import time; time.sleep(60)"
    return ("import subprocess, sys, time; "
            f"g = subprocess.Popen([sys.executable, '-c', {grandchild!r}], stdout=subprocess.PIPE); "
            f"g.stdout.readline(); print(g.pid, flush=True); {then}")


def test_a_child_has_its_own_process_group_and_says_how_it_ended():
    child = python("import time; time.sleep(60)")
    assert os.getpgid(child.pid) == child.pid != os.getpgid(0)
    assert child.poll() is None and child.ended() == "running"
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(0.1)
    assert child.stop(5) == -signal.SIGTERM and child.ended() == "killed by SIGTERM"
    assert python("raise SystemExit(3)").wait(30) == 3


def test_one_that_ignores_sigterm_is_killed_after_its_grace():
    child = python(IGNORE_TERM + "print('up', flush=True); import time; time.sleep(60)", stdout=subprocess.PIPE)
    assert child.process.stdout.readline() == b"up\n"
    began = time.monotonic()
    assert child.stop(0.5) == -signal.SIGKILL
    assert 0.5 <= time.monotonic() - began < 10 and child.ended() == "killed by SIGKILL"


def test_stop_can_ask_its_own_way_first():
    child = python(IGNORE_TERM + "import os, signal; signal.signal(signal.SIGUSR1, lambda *a: os._exit(7)); "
                   "print('up', flush=True); signal.pause()", stdout=subprocess.PIPE)
    assert child.process.stdout.readline() == b"up\n"
    assert child.stop(10, ask=lambda: child.signal(signal.SIGUSR1, group=False)) == 7


@pytest.mark.parametrize("ending", ["by itself", "stopped"])
def test_no_grandchild_outlives_its_child(ending):
    child = python(grandchild_code("raise SystemExit(0)" if ending == "by itself" else "time.sleep(60)"),
                   stdout=subprocess.PIPE)
    grandchild = int(child.process.stdout.readline())
    assert alive(grandchild)
    code = child.wait(30) if ending == "by itself" else child.stop(5)
    assert code == (0 if ending == "by itself" else -signal.SIGTERM)
    assert gone_within(grandchild, 5)


def test_a_child_dies_with_its_runner_even_by_kill_9(tmp_path):
    runner = subprocess.Popen([PY, "-c", "from spillage.runner.supervisor import Supervisor; import time; "
                               "c = Supervisor(['sleep', '60']); print(c.pid, flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    child = int(runner.stdout.readline())
    assert alive(child)
    runner.kill()
    runner.wait()
    assert gone_within(child, 5)


def test_a_child_that_never_gets_ready_is_stopped_and_said_to_be(tmp_path):
    child = Child("slow", [PY, "-c", "print('booting', flush=True); import time; time.sleep(60)"], r"ready on (\S+)",
                  tmp_path / "slow.log", timeout=1)
    with pytest.raises(ChildError, match=r"slow not ready after 1 s; its output is in \S+slow.log: booting"):
        child.start()
    assert child.supervisor.returncode == -signal.SIGTERM and not alive(child.supervisor.pid)


def test_a_child_that_dies_early_says_how_and_what_it_printed(tmp_path):
    child = Child("early", [PY, "-c", "print('port in use', flush=True); raise SystemExit(1)"], "ready",
                  tmp_path / "early.log", timeout=30)
    with pytest.raises(ChildError, match=r"early exited with 1 before it was ready; .*: port in use"):
        child.start()


def test_a_ready_child_gives_its_match_and_stops_with_its_group(tmp_path):
    code = grandchild_code("print('ready on 127.0.0.1:9', flush=True); time.sleep(60)")
    with Child("server", [PY, "-c", code], r"ready on (\S+)", tmp_path / "server.log") as child:
        assert child.match.group(1) == "127.0.0.1:9" and child.exited() is None
        grandchild = int((tmp_path / "server.log").read_text().split()[0])
    assert child.exited() == -signal.SIGTERM and gone_within(grandchild, 5)
