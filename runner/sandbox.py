"""The agent's sandbox (docs/EVIDENCE.md, "Isolation"), made by bubblewrap, the tool Flatpak runs apps in.

The agent runs in namespaces of its own: mount, pid, network, IPC, UTS (and a user namespace when the
runner is not root). It sees the system's programs (/usr and a few files of /etc), the interpreters and
program folders its command names, spillage's own packages, read-only, and its work folder, writable;
nothing of the spillage home (keys, CA key, catalogs) or of the runs folder (every session), which are
covered over where they lie below something it sees (judged by real paths, links followed). It sees no
process but its own. Its network is a loopback of its own, on which the proxy answers at a loopback port the sandbox chooses (`proxy_url`,
which the agent's HTTP_PROXY names) and the model endpoint, when the run reaches it directly, at its
usual address, relayed over Unix sockets to the real ones (runner/relay.py); nothing else is reachable
from inside, not the origins, not another session's proxy. So the agent can start while the proxy
boots: its connections to the proxy wait in the relay until the proxy listens (`proxy_ready`).

The sandbox's first process runs runner/sandbox_init.py, which starts the agent and says when it has
exited; the runner then ends the sandbox's pid namespace (runner/pidns.py: SIGKILL to its first process,
by a pidfd), and the kernel ends every process left in it: a child the agent forked cannot outlive the
run, even one that holds bubblewrap's own first process stopped by tracing it (`--die-with-parent`
does the same if the runner dies). As root, bubblewrap runs privileged with every
capability dropped (the agent's uid is then root's, with no power over anything it cannot see); with
`--agent-user` the first process starts the agent as that user.
"""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

from spillage.runner.agent_user import AgentUser
from spillage.runner.pidns import PidNamespace
from spillage.runner.relay import Later
from spillage.runner.supervisor import Supervisor
from spillage.runner.relay import OutsideRelays

#: Files and folders of /etc a program may need (users, libraries, fonts, TLS roots, Chromium's own).
ETC = ("passwd", "group", "nsswitch.conf", "host.conf", "gai.conf", "ld.so.cache", "ld.so.conf",
       "ld.so.conf.d", "alternatives", "fonts", "ssl", "ca-certificates", "localtime", "timezone",
       "mime.types", "os-release", "debian_version", "xdg", "chromium", "chromium.d")
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
OWN = ("/dev", "/proc", "/sys", "/run", "/etc")   # the sandbox's own (or, for /etc, a chosen few of its files)
SOCKETS = Path("/run/spillage")         # where the relays' Unix sockets are, inside
# spillage's folders the sandbox shows: the agent side and what it may import (tests/test_rooms.py), and
# the runner, for the sandbox's first process (runner/sandbox_init.py); the proxy's addons, the audit and
# the reports stay out.
PACKAGES = ("agents", "scenarios", "proxy", "runner")
STOP_SECONDS = 15                       # for sandbox_init to stop the agent (it gives it 10 s)
POLL_SECONDS = 0.05
PRIVILEGED_PORTS = 1024


class SandboxError(ValueError):
    """No sandbox can be made here, or none for this agent; the message says why."""


def namespaces(privileged: bool) -> list[str]:
    """bubblewrap's namespace and capability options (a user namespace only when not root)."""
    options = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
               "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    return options if privileged else ["--unshare-user", *options]


def system_mounts() -> list[str]:
    """The system's programs, read-only, and a /proc, /dev, /tmp and /run of the sandbox's own."""
    args = []
    for path in SYSTEM:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    args += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/dev/shm",
             "--perms", "1777", "--tmpfs", "/tmp", "--tmpfs", "/run", "--perms", "0755", "--dir", "/etc"]
    for name in ETC:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return args


@functools.cache
def sandbox_problem() -> str | None:
    """Why no sandbox can be made here (no bubblewrap, no namespaces), or None when one can."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap is not installed (apt-get install -y bubblewrap)"
    probe = subprocess.run([bwrap, *namespaces(os.geteuid() == 0), *system_mounts(), "--", "true"],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if probe.returncode != 0:
        why = (probe.stderr.strip().splitlines() or [f"exit status {probe.returncode}"])[-1]
        return f"bubblewrap cannot make a sandbox here ({why})"
    return None


@functools.cache
def bwrap_version() -> str:
    """`bubblewrap 0.8.0`, as bwrap --version says it."""
    return subprocess.run(["bwrap", "--version"], capture_output=True, text=True).stdout.strip()


@dataclass(frozen=True)
class Isolation:
    """How the agent is kept from the evidence: `sandbox` (bubblewrap) or `none`, as `user` when given."""

    level: str
    user: AgentUser | None = None

    @property
    def sandboxed(self) -> bool:
        return self.level == "sandbox"

    def describe(self) -> dict:
        """What meta.json records: the level, the tool, and which uid the agent ran as."""
        found = {"level": self.level, "uid": self.user.uid if self.user else os.getuid()}
        if self.user:
            found["user"] = self.user.name
        if self.sandboxed:
            found["tool"] = bwrap_version()
        return found

    def line(self) -> str:
        """The console's line at the start of a run."""
        who = f"as {self.user.name}" if self.user else f"as uid {os.getuid()}, the runner's"
        if self.sandboxed:
            return f"isolation: sandbox ({bwrap_version()}), the agent {who}"
        return (f"isolation: none: the agent runs {who}, outside any sandbox"
                + ("" if self.user else ": it can read the spillage home and the session (docs/EVIDENCE.md)"))


@dataclass(frozen=True)
class Endpoint:
    """An address the agent reaches from inside (`inside`) and what it is relayed to outside."""

    inside: tuple[str, int]
    outside: tuple[str, int] | Later
    name: str = ""        # a host name the sandbox's /etc/hosts gives the inside address


def endpoints(proxy_url: str, model_host: str | None) -> list[Endpoint]:
    """The proxy at its own address, and a model endpoint reached directly: at its own address when it
    is a loopback one, else at a loopback address of its own that /etc/hosts names it by."""
    host, port = proxy_url.removeprefix("http://").rsplit(":", 1)
    found = [Endpoint((host, int(port)), (host, int(port)))]
    if not model_host:
        return found
    name, port = model_host.rsplit(":", 1)
    address = "127.0.0.1" if name == "localhost" else name.strip("[]")
    try:
        loopback = ipaddress.ip_address(address).is_loopback
    except ValueError:   # a host name
        return [*found, Endpoint(("127.0.0.10", int(port)), (name, int(port)), name)]
    if not loopback:
        raise SandboxError(f"the model endpoint {model_host} is an address outside this machine, which the "
                           "sandbox cannot stand for; name it by host name, or use --model-via-proxy")
    return [*found, Endpoint((address, int(port)), (address, int(port)))]


def program_roots(argv: list[str], env: dict) -> list[Path]:
    """The folders the agent's command needs to see: its program's (the prefix above a `bin` folder, and
    a virtual environment's base interpreter) and the Chromium $SPILLAGE_CHROMIUM names, if any, and
    those of the files and folders its arguments name."""
    roots = [*interpreter_roots(Path(sys.executable)), *package_roots()]
    for program in (shutil.which(argv[0]) if argv else None, env.get("SPILLAGE_CHROMIUM")):
        if program:
            roots += interpreter_roots(Path(program))
    for arg in argv[1:]:
        path = Path(arg)
        if path.is_absolute() and path.exists():
            roots.append(path if path.is_dir() else path.parent)
    return [r for r in roots if not any(r == Path(s) or Path(s) in r.parents for s in (*SYSTEM, *OWN))]


def interpreter_roots(program: Path) -> list[Path]:
    """Where a program lives: a virtual environment and its base Python, or the prefix above `bin`."""
    found = []
    for path in dict.fromkeys((program.absolute(), Path(os.path.realpath(program)))):
        venv = path.parent.parent
        config = venv / "pyvenv.cfg"
        if config.is_file():
            found.append(venv)
            for line in config.read_text(encoding="utf-8", errors="replace").splitlines():
                key, _, value = line.partition("=")
                if key.strip() == "home":
                    found.append(Path(value.strip()).parent)
        else:
            found.append(venv if path.parent.name == "bin" else path.parent)
    return found


def package_roots() -> list[Path]:
    """spillage's own packages, wherever they are installed (the adapters import them)."""
    return [Path(p) for name in PACKAGES for p in find_spec(f"spillage.{name}").submodule_search_locations]


def visible(argv: list[str], env: dict, hidden: tuple[Path, ...]) -> tuple[list[Path], list[Path]]:
    """The folders `argv` (run with `env`) needs to see, read-only, and where the `hidden` ones below them
    lie inside the sandbox, to be covered over. A folder is judged by where it really is, its links
    followed (bubblewrap binds what they name): SandboxError when one is inside a hidden folder, or is the
    machine's own /proc, /dev, /sys, /run or /etc (or holds them) under another name."""
    roots = list(dict.fromkeys(program_roots(argv, env)))
    hidden = tuple(dict.fromkeys(Path(os.path.realpath(h)) for h in hidden))
    covered = []
    for root in roots:
        real = Path(os.path.realpath(root))
        called = "" if real == root else f" (that is {real})"
        secret = next((h for h in hidden if h == real or h in real.parents), None)
        if secret is not None:
            raise SandboxError(f"the agent's {root}{called} is inside {secret}, which the sandbox hides from it; "
                               "move it elsewhere")
        if any(real == Path(o) or Path(o) in real.parents or real in Path(o).parents for o in OWN):
            raise SandboxError(f"the agent's {root}{called} is or holds the machine's own {', '.join(OWN)}, of "
                               "which the sandbox has its own; name what it needs of them by their usual paths")
        covered += [root / h.relative_to(real) for h in hidden if real in h.parents]
    return roots, covered


def parent_folders(paths: list[Path]) -> list[str]:
    """bubblewrap's options that make the folders above `paths` 0755 (bubblewrap itself would make them
    0700, which an agent of another user could not pass)."""
    folders = {parent for path in paths for parent in path.parents if parent != Path("/")}
    return [arg for folder in sorted(folders, key=lambda f: len(f.parts))
            for arg in ("--perms", "0755", "--dir", str(folder))]


def port_options(reach: list[Endpoint]) -> list[str]:
    """What listening on the endpoints' inside ports needs: a port below 1024 needs root."""
    if all(e.inside[1] >= PRIVILEGED_PORTS for e in reach):
        return []
    if os.geteuid() != 0:
        raise SandboxError("the sandbox can stand for an endpoint on a port below 1024 only when the runner "
                           "is root; use --model-via-proxy, or --isolation none")
    return ["--cap-add", "CAP_NET_BIND_SERVICE"]


def check_sandbox(argv: list[str], hidden: tuple[Path, ...], model_host: str | None) -> None:
    """SandboxError if this agent cannot run in a sandbox (before anything starts)."""
    visible(argv, dict(os.environ), hidden)
    port_options(endpoints("http://127.0.0.1:1024", model_host))


def free_port(model_host: str | None) -> int:
    """A loopback port free here that is not the model endpoint's (HOST:PORT): where the proxy answers
    inside the sandbox, whose network has nothing else."""
    while True:
        with socket.create_server(("127.0.0.1", 0)) as probe:
            port = probe.getsockname()[1]
        if not (model_host or "").endswith(f":{port}"):
            return port


@dataclass
class Sandbox:
    """One agent's sandbox: its work folder, what it must not see (the spillage home, the runs folder),
    the model endpoint it reaches directly (host:port, or None), and the user it runs as. Inside, the
    proxy is at `proxy_url`; it is reached once `proxy_ready` names the proxy's real address."""

    work: Path
    hidden: tuple[Path, ...]
    model_host: str | None = None
    user: AgentUser | None = None

    def __post_init__(self) -> None:
        self.proxy_url = f"http://127.0.0.1:{free_port(self.model_host)}"
        self.proxy = Later()

    def proxy_ready(self, proxy_url: str) -> None:
        """The proxy listens at `proxy_url`: the agent's connections to it, waiting or new, go there."""
        host, port = proxy_url.removeprefix("http://").rsplit(":", 1)
        self.proxy.set(host, int(port))

    def command(self, argv: list[str], env: dict, reach: list[Endpoint], sockets: Path, control_fd: int,
                info_fd: int) -> list[str]:
        """bubblewrap's command line running `argv` with `env` in the sandbox, reaching `reach` through the
        relays' sockets in `sockets`, with `control_fd` its socket to us and `info_fd` where it says which
        pid its namespace's first process has."""
        args = ["bwrap", *namespaces(os.geteuid() == 0), *port_options(reach), "--info-fd", str(info_fd)]
        if self.user:   # sandbox_init starts the agent as the user, in its folder (the agent has none of these)
            args += [arg for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_DAC_READ_SEARCH") for arg in ("--cap-add", cap)]
        roots, covered = visible(argv, env, self.hidden)
        args += [*system_mounts(), "--ro-bind", str(sockets / "hosts"), "/etc/hosts", *parent_folders([*roots, self.work])]
        args += [arg for root in roots for arg in ("--ro-bind", str(root), str(root))]
        args += [arg for secret in covered for arg in ("--tmpfs", str(secret))]
        args += ["--bind", str(self.work), str(self.work), "--ro-bind", str(sockets), str(SOCKETS),
                 "--remount-ro", "/", "--chdir", str(self.work), "--",
                 sys.executable, "-m", "spillage.runner.sandbox_init", "--control", str(control_fd)]
        for i, endpoint in enumerate(reach):
            host, port = endpoint.inside
            args += ["--relay", f"{host}:{port}={SOCKETS / f'{i}.sock'}"]
        if self.user:
            args += ["--user", f"{self.user.uid}:{self.user.gid}"]
        return [*args, "--", *argv]

    def start(self, argv: list[str], env: dict, out, err) -> SandboxedAgent:
        """Start `argv` in the sandbox, its output to `out` and `err`; OSError when bubblewrap cannot be
        started."""
        proxy, *model = endpoints(self.proxy_url, self.model_host)
        reach = [dataclasses.replace(proxy, outside=self.proxy), *model]
        sockets = Path(tempfile.mkdtemp(prefix="spillage-sandbox-"))   # 0700: the agent cannot list it
        (sockets / "hosts").write_text(hosts(reach), encoding="utf-8")
        relays = OutsideRelays(sockets, {f"{i}.sock": e.outside for i, e in enumerate(reach)})
        ours, theirs = socket.socketpair()
        info_read, info_write = os.pipe()
        try:
            relays.__enter__()
            command = self.command(argv, env, reach, sockets, theirs.fileno(), info_write)
            child = Supervisor(command, env=env, stdout=out, stderr=err, cwd=self.work,
                               pass_fds=(theirs.fileno(), info_write))
        except BaseException:
            relays.__exit__()
            ours.close()
            os.close(info_read)
            shutil.rmtree(sockets, ignore_errors=True)
            raise
        finally:
            theirs.close()
            os.close(info_write)
        return SandboxedAgent(child, ours, relays, sockets, PidNamespace(info_read, child.pid))


def hosts(reach: list[Endpoint]) -> str:
    """The sandbox's /etc/hosts: localhost, and a model endpoint's name at its inside address."""
    lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback"]
    lines += [f"{e.inside[0]} {e.name}" for e in reach if e.name]
    return "\n".join(lines) + "\n"


class SandboxedAgent:
    """A running sandbox: wait for it, stop it (the agent gets SIGTERM, then SIGKILL), and whether the
    agent started at all. Once the agent has exited, or the sandbox has, its pid namespace is ended:
    nothing the agent left is there when `wait` returns."""

    def __init__(self, child: Supervisor, control: socket.socket, relays: OutsideRelays, sockets: Path,
                 namespace: PidNamespace):
        self.child, self.control, self.relays, self.sockets = child, control, relays, sockets
        self.namespace = namespace
        self.said = ""
        control.setblocking(False)

    @property
    def returncode(self) -> int | None:
        """The agent's exit status, as the first process said it (else bubblewrap's), once it has ended."""
        exited = re.search(r"^exited (\d+)$", self.said, re.MULTILINE)
        return int(exited.group(1)) if exited and self.sockets is None else self.child.returncode

    def wait(self, timeout: float | None = None) -> int:
        """The agent's exit status once it has ended (subprocess.TimeoutExpired before); then every process
        of the sandbox is gone, and the relays are closed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.child.poll() is None and not self.agent_exited():
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.child.argv, timeout)
            select.select([self.control], [], [], POLL_SECONDS if deadline is None
                          else max(0.0, min(POLL_SECONDS, deadline - time.monotonic())))
        self.end()
        return self.returncode

    def agent_exited(self) -> bool:
        """Whether the first process said the agent has exited, or is gone (its control socket closed)."""
        try:
            while data := self.control.recv(4096):
                self.said += data.decode("utf-8", "replace")
            return True   # closed
        except BlockingIOError:
            return "\nexited " in f"\n{self.said}"
        except OSError:
            return True

    def end(self) -> None:
        """End the pid namespace and, with it, bubblewrap; close the relays."""
        if self.sockets is None:
            return
        if not self.namespace.end():
            self.child.signal(signal.SIGKILL)
        self.child.wait()
        self.agent_exited()
        self.control.close()
        self.relays.__exit__()
        shutil.rmtree(self.sockets, ignore_errors=True)
        self.sockets = None

    def stop(self) -> None:
        """Ask the sandbox to stop the agent (its control socket closed); end it if the agent is still there
        after STOP_SECONDS."""
        if self.sockets is not None:
            self.ask_to_stop()
            try:
                self.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                pass
        self.end()

    def ask_to_stop(self) -> None:
        try:
            self.control.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def failure(self) -> str | None:
        """Once it has ended: why the agent did not start (None when it did): its program could not be
        run, or the sandbox was never made (bubblewrap says why on the agent's stderr)."""
        if self.said.startswith("started"):
            return None
        return self.said.removeprefix("failed ").strip() or "the sandbox could not be made (see agent.stderr)"
