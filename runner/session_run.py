"""One session: a scenario, an agent behind the proxy, a sealed capture log and meta.json."""

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from spillage.proxy.ca import ensure_ca
from spillage.proxy.capturelog import utc_timestamp
from spillage.proxy.session import create_session
from spillage.proxy.session import write_meta
from spillage.proxy.verify import verify
from spillage.proxy.version import SPILLAGE_VERSION
from spillage.runner.agent_env import agent_environment
from spillage.runner.agent_env import AgentHome
from spillage.scenarios.model import Scenario

SCENARIO_COPY = "scenario.yaml"


@dataclass(frozen=True)
class AgentSpec:
    """What to run as the agent: our browser-use adapter with a model, or any command."""

    label: str
    argv: tuple[str, ...]
    model: str | None = None
    isolated_home: bool = False  # HOME/TMPDIR inside the session (browser-use writes there)

    @classmethod
    def browser_use(cls, model: str, max_steps: int, base_url: str | None = None) -> "AgentSpec":
        argv = [sys.executable, "-m", "spillage.runner.browser_agent", "--model", model,
                "--max-steps", str(max_steps)]
        if base_url:
            argv += ["--base-url", base_url]
        return cls(f"browser-use-{model.replace(':', '-')}", tuple(argv), model, True)

    @classmethod
    def command(cls, argv: list[str]) -> "AgentSpec":
        return cls(Path(argv[0]).name, tuple(argv))


@dataclass(frozen=True)
class SessionResult:
    """Where the session is and how it ended."""

    session_dir: Path
    agent_exit: int | None
    timed_out: bool
    records: int
    head: str
    capture_ok: bool


def run_agent(agent: AgentSpec, env: dict, session_dir: Path, timeout: float) -> tuple[int | None, bool]:
    """Run the agent with its output in the session folder; (exit code, timed out)."""
    with open(session_dir / "agent.stdout", "wb") as out, open(session_dir / "agent.stderr", "wb") as err:
        try:
            process = subprocess.Popen(agent.argv, env=env, stdout=out, stderr=err,
                                       stdin=subprocess.DEVNULL, cwd=session_dir,
                                       start_new_session=True)
        except OSError as e:
            err.write(f"spillage: cannot start agent {agent.argv[0]!r}: {e}\n".encode())
            return None, False
        try:
            return process.wait(timeout), False
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 15)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, 9)
                process.wait()
            return process.returncode, True


def run_session(scenario: Scenario, scenario_file: Path, agent: AgentSpec, runs_dir: Path,
                ca_dir: Path, timeout: float = 300, log=print) -> SessionResult:
    """Start origins and proxy, run the agent behind them, seal the log; everything lands in a new session folder."""
    from spillage.runner.stack import Stack

    session_dir = create_session(runs_dir, f"{scenario.id}-{agent.label}")
    log(f"session {session_dir}")
    shutil.copyfile(scenario_file, session_dir / SCENARIO_COPY)
    ca = ensure_ca(ca_dir)
    meta = {
        "session": session_dir.name,
        "spillage": SPILLAGE_VERSION,
        "scenario": {"id": scenario.id, "file": str(scenario_file), "copy": SCENARIO_COPY,
                     "sha256": hashlib.sha256(scenario_file.read_bytes()).hexdigest()},
        "agent": {"label": agent.label, "argv": list(agent.argv), "model": agent.model},
        "ca": {"cert": str(ca.cert_file), "spki": ca.spki_pin},
        "started": utc_timestamp(),
        "status": "running",
    }
    write_meta(session_dir, meta)
    with Stack(session_dir, ca, log=log) as stack:
        env = agent_environment(os.environ, stack.proxy_url, ca, scenario, session_dir,
                                session_dir / SCENARIO_COPY)
        log(f"agent {agent.label} running (timeout {timeout:.0f} s) ...")
        began = time.monotonic()
        with contextlib.ExitStack() as scope:
            if agent.isolated_home:
                env.update(scope.enter_context(AgentHome(session_dir)))
            exit_code, timed_out = run_agent(agent, env, session_dir, timeout)
        took = time.monotonic() - began
        log(f"agent {'timed out' if timed_out else f'exited {exit_code}'} after {took:.1f} s")
    result = verify(session_dir)
    meta.update({
        "ended": utc_timestamp(),
        "status": "timed out" if timed_out else "completed",
        "agent_exit": exit_code,
        "agent_seconds": round(took, 3),
        "proxy": {"url": stack.proxy_url, "exit": stack.exits.get("proxy")},
        "origins": {"url": stack.origin_url, "exit": stack.exits.get("origins")},
    })
    if result.ok:  # meta.json anchors the head; a damaged log is described, not anchored
        meta["capture"] = {"records": result.count, "head": result.head}
    else:
        meta["capture_damage"] = result.summary()
    write_meta(session_dir, meta)
    log(f"capture: {result.count} records, head {result.head}"
        + ("" if result.ok else f"; NOT OK: {result.damage}: {result.message}"))
    return SessionResult(session_dir, exit_code, timed_out, result.count, result.head, result.ok)
