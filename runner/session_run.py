"""One session: a scenario, an agent behind the proxy, a sealed capture log and meta.json."""

import contextlib
import dataclasses
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from spillage.origins.catalog_store import stored_catalog
from spillage.proxy.capturelog import utc_timestamp
from spillage.proxy.layout import AGENT_OUTCOME
from spillage.proxy.layout import AGENT_STDERR
from spillage.proxy.layout import AGENT_STDOUT
from spillage.proxy.layout import SCENARIO_COPY
from spillage.proxy.layout import create_session
from spillage.proxy.layout import create_work_folder
from spillage.proxy.layout import seal_permissions
from spillage.proxy.bound import bound_claim
from spillage.proxy.layout import write_meta
from spillage.proxy.live import live_meta
from spillage.proxy.settings import SEED
from spillage.proxy.settings import TIMEOUT
from spillage.addons.mitm.ca import ensure_ca
from spillage.proxy.signing import load_or_create_key
from spillage.proxy.undumpable import forbid_dumps
from spillage.proxy.version import SPILLAGE_VERSION
from spillage.runner.agent_env import AgentHome
from spillage.runner.agent_env import agent_environment
from spillage.runner.agent_env import hand_over
from spillage.runner.agent_files import Refused
from spillage.runner.agent_files import read_head
from spillage.runner.agent_files import replaced
from spillage.runner.agent_files import tail
from spillage.agents.agent_process import STOPPED
from spillage.runner.children import ChildError
from spillage.runner.heads import describe_evidence
from spillage.runner.conditions import Condition
from spillage.agents.model_spec import parse_model
from spillage.runner.stack import GuardSetting
from spillage.runner.sandbox import Isolation
from spillage.runner.sandbox import Sandbox
from spillage.runner.stack import Stack
from spillage.runner.supervisor import Supervisor
from spillage.scenarios.dump import scenario_yaml
from spillage.scenarios.model import Scenario

STOP_SECONDS = 10   # an unsandboxed agent's group, from SIGTERM to SIGKILL

@dataclass(frozen=True)
class AgentSpec:
    """What to run as the agent: our browser-use adapter with a model, or any command."""

    label: str
    argv: tuple[str, ...]
    model: str | None = None
    isolated_home: bool = False  # HOME/TMPDIR inside the session (the frameworks write there)
    framework: str = "command"
    model_host: str | None = None  # HOST:PORT of the model endpoint; None for scripted models and commands

    @classmethod
    def browser_use(cls, model: str, max_steps: int, base_url: str | None = None) -> "AgentSpec":
        """Our browser-use adapter (agents/browser_agent.py) with `model`."""
        return cls.framework_agent("browser-use", sys.executable, "spillage.agents.browser_agent",
                                   model, max_steps, base_url)

    @classmethod
    def autogen(cls, model: str, max_steps: int, base_url: str | None = None) -> "AgentSpec":
        """AutoGen's MultimodalWebSurfer (agents/autogen_agent.py), in its own virtual environment."""
        from spillage.runner.autogen_venv import autogen_python
        return cls.framework_agent("autogen", str(autogen_python()), "spillage.agents.autogen_agent",
                                   model, max_steps, base_url)

    @classmethod
    def framework_agent(cls, framework: str, python: str, module: str, model: str, max_steps: int,
                        base_url: str | None) -> "AgentSpec":
        argv = [python, "-m", module, "--model", model, "--max-steps", str(max_steps)]
        if base_url:
            argv += ["--base-url", base_url]
        spec = parse_model(model, base_url)
        return cls(f"{framework}-{spec.label()}", tuple(argv), model, True, framework, spec.host())

    @classmethod
    def command(cls, argv: list[str], model_host: str | None = None) -> "AgentSpec":
        """Any command, run with the environment contract of docs/AGENTS.md, reaching its model at
        `model_host` (HOST:PORT, `--model-endpoint`) when given. It runs in its work folder, so arguments
        that are relative paths to existing files (`./agent.sh`, `docs/examples/x.py`) are made absolute
        first, as the caller meant them: without following symlinks, so a venv's `bin/python` stays the
        venv's (resolved, it would be the base interpreter, without the venv's packages)."""
        resolved = [os.path.abspath(a) if "/" in a and not a.startswith("-") and not Path(a).is_absolute()
                    and Path(a).exists() else a for a in argv]
        return cls(Path(argv[0]).name, tuple(resolved), model_host=model_host)


@dataclass(frozen=True)
class AgentOutcome:
    """How the agent process ended, and why it stopped as its adapter reported (`reported`:
    {stopped, detail, steps}, agents/agent_process.py), or the last line it wrote to stderr."""

    exit_code: int | None
    status: str          # completed, timed out, interrupted, failed to start
    detail: str = ""
    reported: dict | None = None
    last_error: str = ""
    refused: tuple[str, ...] = ()   # what the agent left in the place of what the runner reads, and how it was taken

    def describe(self, seconds: float) -> str:
        if self.status != "completed":
            return f"agent {self.status} after {seconds:.1f} s" + (f": {self.detail}" if self.detail else "")
        said = ""
        if self.reported:
            said = f": {self.reported['stopped']}" + (f": {self.reported['detail']}" if self.reported["detail"] else "")
        elif self.exit_code and self.last_error:
            said = f"; its last error line: {self.last_error}"
        return f"agent exited {self.exit_code} after {seconds:.1f} s{said}"


def read_outcome(work: Path) -> dict | None:
    """What a built-in agent reported of why it stopped (outcome.json in its work folder), if well formed;
    Refused when the agent left something else than a file under that name (runner/agent_files.py)."""
    try:
        reported = json.loads(read_head(work, AGENT_OUTCOME).decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(reported, dict) or reported.get("stopped") not in STOPPED:
        return None
    return {"stopped": reported["stopped"], "detail": str(reported.get("detail") or "")[:500],
            "steps": reported.get("steps") if isinstance(reported.get("steps"), int) else None}


def last_error_line(stderr: int) -> str:
    """The last non-blank line of an agent's stderr (the open file `stderr`, its last few KB), on one line."""
    lines = tail(stderr).decode("utf-8", "replace").strip().splitlines()
    return " ".join(lines[-1].split())[:300] if lines else ""


def what_it_left(outcome: AgentOutcome, work: Path, stderr) -> AgentOutcome:
    """`outcome` with what the agent left of why it stopped: its report, and the last line of the stderr the
    runner opened for it when it failed (the last stderr line of an agent that exited 0 is no error);
    what it put in their place is refused and said."""
    refused = [note for note in (replaced(work, AGENT_STDERR, stderr.fileno()),) if note]
    try:
        reported = read_outcome(work)
    except Refused as e:
        reported = None
        refused.append(str(e))
    failed = outcome.exit_code != 0
    return dataclasses.replace(outcome, reported=reported, refused=tuple(refused),
                               last_error=last_error_line(stderr.fileno()) if failed else "")


@dataclass(frozen=True)
class SessionResult:
    """Where the session is and how it ended; `evidence` is how the log was settled (runner/heads.py)."""

    session_dir: Path
    agent: AgentOutcome
    records: int
    head: str
    capture_ok: bool
    evidence: str = "sealed"


class Unsandboxed:
    """An agent started as a plain child (`--isolation none`), in its own process group (runner/supervisor.py)."""

    def __init__(self, child: Supervisor) -> None:
        self.child = child

    def wait(self, timeout: float | None = None) -> int:
        return self.child.wait(timeout)

    def stop(self) -> None:
        """SIGTERM the agent's process group, SIGKILL it if it is still there after STOP_SECONDS."""
        self.child.stop(STOP_SECONDS)

    @property
    def returncode(self) -> int | None:
        return self.child.returncode

    def failure(self) -> str | None:
        return None


def start_agent(agent: AgentSpec, env: dict, work: Path, out, err, isolation: Isolation, sandbox: Sandbox | None):
    """The agent's process, in `sandbox` or, without one, as a plain child (as the isolation's user)."""
    if sandbox is not None:
        return sandbox.start(list(agent.argv), env, out, err)
    user = isolation.user.popen_args() if isolation.user else {}
    return Unsandboxed(Supervisor(list(agent.argv), env=env, stdout=out, stderr=err, cwd=work, **user))


def run_agent(agent: AgentSpec, env: dict, work: Path, timeout: float, log=print,
              isolation: Isolation = Isolation("none"), sandbox: Sandbox | None = None,
              started=lambda: None) -> AgentOutcome:
    """Run the agent in `sandbox` (or as a plain child, in its own process group), in its work folder,
    which also keeps its output; when it returns, no process of the agent's is left in a sandbox.
    `started` is called once the process is, before it is waited for (what it raises stops the agent).

    Ctrl-C is turned into a flag for the time the agent runs, so that it can arrive at any
    moment (even while the process is being started) and still stop the agent's whole group.
    """
    interrupted = threading.Event()
    log(f"agent {agent.label} running (timeout {timeout:.0f} s) ...")
    with interrupts_held(interrupted):
        with open(work / AGENT_STDOUT, "wb") as out, open(work / AGENT_STDERR, "w+b") as err:
            outcome = watch_agent(agent, env, work, timeout, isolation, sandbox, started, interrupted, out, err)
            return what_it_left(outcome, work, err)


@contextlib.contextmanager
def interrupts_held(interrupted: threading.Event):
    """Inside, Ctrl-C only sets `interrupted`: what is inside finishes, and the caller acts on the flag."""
    previous = signal.signal(signal.SIGINT, lambda signum, frame: interrupted.set())
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def watch_agent(agent: AgentSpec, env: dict, work: Path, timeout: float, isolation: Isolation,
                sandbox: Sandbox | None, started, interrupted: threading.Event, out, err) -> AgentOutcome:
    """Start the agent, its output to `out` and `err`, and wait for it to end, or stop it when `interrupted`
    is set or `timeout` s have passed; how it ended."""
    try:
        process = start_agent(agent, env, work, out, err, isolation, sandbox)
    except OSError as e:
        err.write(f"spillage: cannot start agent {agent.argv[0]!r}: {e}\n".encode())
        err.flush()
        return AgentOutcome(None, "failed to start", f"{agent.argv[0]}: {e.strerror or e}")
    try:
        started()
    except BaseException:
        process.stop()
        raise
    deadline = time.monotonic() + timeout
    while True:
        try:
            status = process.wait(0.2)
            failure = process.failure()
            if failure is not None:
                return AgentOutcome(None, "failed to start", failure)
            return AgentOutcome(status, "completed")
        except subprocess.TimeoutExpired:
            pass
        if interrupted.is_set():
            process.stop()
            return AgentOutcome(process.returncode, "interrupted", "Ctrl-C")
        if time.monotonic() > deadline:
            process.stop()
            return AgentOutcome(process.returncode, "timed out", f"stopped after {timeout:.0f} s")


class Servers:
    """A session's stack, launched on entering and up (both servers ready: `up`) when first asked, and at
    the latest on leaving, where it is stopped and the evidence settled (Stack's exit). A sandboxed agent
    starts in between, while the servers boot: it reaches the proxy only through the relay, which holds
    its connections until `up` has told the sandbox where the proxy listens."""

    def __init__(self, stack: Stack, sandbox: Sandbox | None, meta: dict):
        self.stack, self.sandbox, self.meta = stack, sandbox, meta
        self.state = "launched"

    def __enter__(self) -> "Servers":
        self.stack.launch()
        return self

    def up(self) -> None:
        if self.state != "launched":
            return
        self.state = "failed"      # Stack's enter stops both servers when one fails
        self.stack.__enter__()
        self.state = "up"
        self.meta["signing"]["session_key"] = self.stack.session_key.key
        if self.sandbox is not None:
            self.sandbox.proxy_ready(self.stack.proxy_url)

    def __exit__(self, *exc) -> None:
        self.up()   # an agent that never started still leaves a log to settle
        if self.state == "up":
            self.stack.__exit__(*exc)


def catalog_scenarios(scenario: Scenario) -> tuple[list[Scenario] | None, bool]:
    """The scenarios a session's catalog is built from (stored_catalog's `scenarios`), and whether `scenario`
    is not the benchmark's. One of the benchmark's own, as its file holds it, gives (None, False): the
    benchmark's catalog, which a run finds by the hash of the benchmark's files without reading them.
    Another takes the place of its persona's scenarios, so the sites carry its surfaces."""
    if benchmark_own(scenario):
        return None, False
    from spillage.origins.catalog import with_benchmark

    scenarios = with_benchmark([scenario])
    return scenarios, any(s is scenario for s in scenarios)


def benchmark_own(scenario: Scenario) -> bool:
    """True when `scenario` is one of the benchmark's, as its file (one of the benchmark's) holds it now: then
    the benchmark with it in place of its persona's scenarios is the benchmark (origins.catalog.with_benchmark),
    and only its own file is read to know it."""
    from spillage.scenarios.files import BENCHMARK_DIRS
    from spillage.scenarios.files import scenario_files
    from spillage.scenarios.loader import load_file

    path = Path(scenario.file)
    if not scenario.file or path.resolve() not in {p.resolve() for p in scenario_files(BENCHMARK_DIRS)}:
        return False
    return scenario in load_file(path)


def run_session(scenario: Scenario, agent: AgentSpec, runs_dir: Path,
                home: Path, timeout: float = TIMEOUT.default, log=print, seed: int = SEED.default,
                condition: Condition = Condition(), session_name: str | None = None,
                model_via_proxy: bool = False, isolation: Isolation = Isolation("sandbox"),
                live: tuple[str, ...] = ()) -> SessionResult:
    """Start origins and proxy, run the agent behind them, seal the log; everything lands in a new session
    folder (named `session_name`, or by time, scenario and agent), and the agent works in its own folder
    beside it, isolated as `isolation` says (docs/EVIDENCE.md; runner/sandbox.py).

    The sites' catalog is generated with `seed` from the benchmark, plus `scenario` when it is not one of it,
    once: it is kept in the spillage home by content hash, which meta.json records. The agent gets the
    prompt and system note of `condition`. With `model_via_proxy` the agent's calls to its model endpoint
    go through the proxy too, and are captured (the provider becomes an observer). Requests to the
    `live` hosts (proxy/live.py patterns) reach the real sites, captured; meta.json names them.
    The CA and the signing key are those of the spillage `home`."""
    task = condition.task(scenario)
    scenarios, added = catalog_scenarios(scenario)
    forbid_dumps()   # this process holds the keys: not even the agent's uid may read its memory
    signing_key = load_or_create_key(home)   # a broken home is said before a session folder exists
    ca = ensure_ca(home / "ca")
    label = "-".join(part for part in (scenario.id, agent.label, condition.label()) if part)
    interrupted = threading.Event()   # Ctrl-C while the session folder is made waits for its meta.json
    with interrupts_held(interrupted):
        session_dir = create_session(runs_dir, label, session_name)
        work = create_work_folder(session_dir)
        routed_model = agent.model_host if model_via_proxy else None
        sandbox = (Sandbox(work, (Path(home).resolve(), session_dir.parent), None if routed_model else agent.model_host,
                           isolation.user) if isolation.sandboxed else None)
        log(f"session {session_dir}")
        log(isolation.line())
        copy = scenario_yaml(scenario)
        (session_dir / SCENARIO_COPY).write_text(copy, encoding="utf-8")
        meta = {
            "session": session_dir.name,
            "spillage": SPILLAGE_VERSION,
            "scenario": {"id": scenario.id, "file": scenario.file, "copy": SCENARIO_COPY,
                         "file_sha256": hashlib.sha256(Path(scenario.file).read_bytes()).hexdigest()},
            "agent": {"label": agent.label, "framework": agent.framework, "argv": list(agent.argv),
                      "model": agent.model},
            "catalog": {"seed": seed, "adds": scenario.id if added else None},   # and its sha256 once built
            "condition": condition.as_json(),
            "model_endpoint": {"host": agent.model_host, "via_proxy": routed_model is not None},
            "ca": {"cert": str(ca.cert_file), "spki": ca.spki_pin},
            "work": str(work),
            "isolation": isolation.describe(),
            **live_meta(live),
            "started": utc_timestamp(),
            "status": "running",
        }
        write_meta(session_dir, meta)
    before_agent = AgentOutcome(None, "interrupted", "Ctrl-C before the agent started")
    outcome, took, stack = before_agent, 0.0, None
    try:
        if interrupted.is_set():
            raise KeyboardInterrupt
        catalog, meta["catalog"]["sha256"] = stored_catalog(home, scenarios, seed)
        stack = Stack(session_dir, ca, signing_key, catalog, log=log, isolation=isolation.level,
                      bound=bound_claim(session_dir, meta),
                      model_hosts=(routed_model,) if routed_model else (), live=live,
                      guard=GuardSetting(condition.guard, condition.guard_policy, session_dir / SCENARIO_COPY))
        meta["signing"] = {"key": stack.key_fingerprint}
        with Servers(stack, sandbox, meta) as servers:
            if sandbox is None:   # nothing but a sandbox's relay holds the agent's first request until the proxy listens
                servers.up()
            proxy_url = sandbox.proxy_url if sandbox else stack.proxy_url
            env = agent_environment(os.environ, proxy_url, ca, scenario, work, copy, task, condition.system_note)
            if routed_model:
                env["SPILLAGE_MODEL_PROXY"] = proxy_url
            with contextlib.ExitStack() as scope:
                if agent.isolated_home or sandbox is not None:
                    env.update(scope.enter_context(AgentHome(work, short_tmp=sandbox is None)))
                hand_over(work, isolation.user.owner if isolation.user else None)
                began = time.monotonic()
                outcome = run_agent(agent, env, work, timeout, log, isolation, sandbox, servers.up)
                took = time.monotonic() - began
            log(outcome.describe(took))
            for note in outcome.refused:
                log(note)
    except KeyboardInterrupt:
        log("interrupted; sealing the session")
    except BaseException as e:  # the servers did not start, or something of ours broke: said, then raised
        if outcome is before_agent:
            outcome = AgentOutcome(None, "not run", str(e) if isinstance(e, ChildError) else f"{type(e).__name__}: {e}")
        raise
    finally:
        settlement = finish_meta(session_dir, meta, stack, outcome, took)
    if settlement is None:
        return SessionResult(session_dir, outcome, 0, "", False, "none")
    result = settlement.result
    log(f"capture: {result.count} records, head {result.head}; evidence {settlement.status}"
        + ("" if settlement.ok else f": {settlement.detail or result.summary()}"))
    return SessionResult(session_dir, outcome, result.count, result.head, settlement.ok, settlement.status)


def finish_meta(session_dir: Path, meta: dict, stack: Stack | None, outcome: AgentOutcome, took: float):
    """Write the final meta.json: how the agent ended, how the evidence was settled and, for a log the
    proxy sealed, its verified head and final signed head; then make the evidence read-only. `stack`
    is None when the servers were never made (the catalog could not be built)."""
    settlement = stack.settlement if stack else None
    meta.update({
        "ended": utc_timestamp(),
        "status": outcome.status,
        "agent_exit": outcome.exit_code,
        "agent_seconds": round(took, 3),
    })
    if stack is not None:
        meta["proxy"] = {"url": stack.proxy_url, "exit": stack.exits.get("proxy")}
        meta["origins"] = {"url": stack.origin_url, "exit": stack.exits.get("origins")}
    if outcome.detail:
        meta["status_detail"] = outcome.detail
    if outcome.reported:
        meta["agent_outcome"] = outcome.reported
    if outcome.last_error:
        meta["agent_last_error"] = outcome.last_error
    if outcome.refused:
        meta["agent_files_refused"] = list(outcome.refused)
    if settlement is None:  # the servers never started
        meta["evidence"] = "none"
        write_meta(session_dir, meta)
        return None
    describe_evidence(meta, settlement)
    write_meta(session_dir, meta)
    seal_permissions(session_dir)
    return settlement
