"""The servers a session needs: origins and the capturing proxy, started and stopped together, and the
settlement of the evidence once they have stopped."""

import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from spillage.proxy.capturelog import utc_timestamp
from spillage.proxy.layout import ACCESS_LOG
from spillage.proxy.layout import LOG_NAME
from spillage.proxy.layout import ORIGINS_LOG
from spillage.proxy.layout import PROXY_LOG
from spillage.addons.mitm.ca import CertAuthority
from spillage.addons.mitm.launcher import mitmdump_command
from spillage.addons.mitm.launcher import mitmdump_env
from spillage.addons.options import GUARD
from spillage.addons.options import GUARD_CATALOG
from spillage.addons.options import GUARD_POLICY
from spillage.addons.options import GUARD_SCENARIO
from spillage.proxy.signing import SessionKey
from spillage.proxy.signing import Signer
from spillage.proxy.signing import fingerprint
from spillage.proxy.signing import raw_public
from spillage.runner.children import Child
from spillage.runner.heads import HeadMonitor
from spillage.runner.heads import Settlement
from spillage.runner.heads import settle

ORIGINS_READY = r"spillage origins listening on (http://127\.0\.0\.1:(\d+))"
PROXY_READY = r"spillage proxy listening on (http://\S+)"


def origins_command(catalog: Path, built: bool = False, fd: int | None = None,
                    access_log: Path | None = None) -> list[str]:
    """argv for our origin server on a free loopback port (or on the listening socket `fd` it
    inherits): it builds the benchmark's catalog into `catalog`, or serves `catalog` as it is when
    `built`; it logs every request it receives to `access_log` when given."""
    where = ["--fd", str(fd)] if fd is not None else ["--port", "0"]
    logged = ["--access-log", str(access_log)] if access_log else []
    return [sys.executable, "-m", "spillage.origins.server", *where, *logged,
            "--from-catalog" if built else "--catalog", str(catalog)]


@dataclass(frozen=True)
class GuardSetting:
    """What the proxy's leak guard does (docs/GUARD.md): its mode, policy file and the scenario whose
    irrelevant attributes it guards."""

    mode: str = "off"
    policy: str = ""
    scenario: Path | None = None


def guard_options(guard: GuardSetting, catalog: Path) -> list[str]:
    """mitmdump options that switch the leak guard on (addons/leakguard.py)."""
    options = ((GUARD, guard.mode), (GUARD_POLICY, guard.policy), (GUARD_SCENARIO, str(guard.scenario or "")),
               (GUARD_CATALOG, str(catalog)))
    return [arg for option, value in options if value for arg in option.set(value)]


def key_pipe(session_key: SessionKey) -> int:
    """A pipe holding the session key, for the proxy to read (mitmdump_command's `signer_fd`); its read
    end, to pass to the child and close after."""
    read_end, write_end = os.pipe()
    with os.fdopen(write_end, "w", encoding="utf-8") as pipe:
        pipe.write(session_key.to_json())  # far below a pipe's buffer: never blocks
    return read_end


@dataclass
class Stack:
    """Origins + proxy for one session folder. `with Stack(...) as s:` then use `s.proxy_url`.

    The origins serve `catalog`, a built catalog file (origins/catalog_store.py keeps them by content
    hash; the session names it in meta.json), read-only. They listen on a socket bound here, so the
    proxy, which must know their address, starts at the same time.

    The proxy signs the log with a session key made here and certified by `signing_key` (which states
    the agent's `isolation`, that it cosigns, and what of the folder it binds: `bound`); it gets the key over a pipe and reports each signed
    checkpoint on its stdout (runner/heads.py). On exit, once both servers have stopped, `settlement`
    says whether the log on disk is what the proxy wrote; if it is, its final checkpoint is cosigned."""

    session_dir: Path
    ca: CertAuthority
    signing_key: object               # the long-term Ed25519 key (proxy.signing.load_or_create_key)
    catalog: Path                     # the catalog file the origins serve
    tool: str = "spillage run"        # who seals the log if the proxy dies first
    proxy_port: int = 0
    inline_limit: int | None = None
    model_hosts: tuple[str, ...] = ()  # model endpoints the proxy lets through (--model-via-proxy)
    live: tuple[str, ...] = ()         # live hosts the proxy lets through (--live, proxy/live.py patterns)
    guard: GuardSetting = GuardSetting()
    isolation: str | None = None      # how the agent is isolated, stated in the session key's certificate
    bound: dict | None = None         # the scenario copy and meta.json fields it binds (proxy/bound.py)
    log: Callable[[str], None] = print
    origin_url: str = ""
    proxy_url: str = ""
    exits: dict = field(default_factory=dict)
    settlement: Settlement | None = None
    proxy: Child | None = field(default=None, init=False, repr=False)
    origins: Child | None = field(default=None, init=False, repr=False)
    _key_pipe: int | None = field(default=None, init=False, repr=False)  # the proxy's end, until it is ready

    @property
    def key_fingerprint(self) -> str:
        """Fingerprint of the long-term key that certifies this session's key."""
        return fingerprint(raw_public(self.signing_key))

    def launch(self) -> None:
        """Start both servers without waiting for them: the proxy first, since it takes the longer to boot
        (a few tenths of a second), in which the caller can do what needs no server. `with` then waits
        until both are ready (and launches them, if this was not called)."""
        claims = ({"cosign": True} | ({"isolation": self.isolation} if self.isolation else {})
                  | ({"bound": self.bound} if self.bound else {}))
        self.session_key = SessionKey.issue(self.signing_key, self.session_dir.name, utc_timestamp(), **claims)
        self.monitor = HeadMonitor(self.session_key)
        self._key_pipe = key_pipe(self.session_key)
        guarded = self.guard.mode != "off"
        try:
            with socket.create_server(("127.0.0.1", 0)) as listener:
                origin = f"127.0.0.1:{listener.getsockname()[1]}"
                argv = mitmdump_command(self.ca, origin, self.session_dir, self.proxy_port, self.inline_limit,
                                        self.model_hosts, self._key_pipe, guarded, self.live)
                if guarded:
                    argv += guard_options(self.guard, self.catalog)
                self.proxy = Child("proxy", argv, PROXY_READY, self.session_dir / PROXY_LOG,
                                   env=mitmdump_env(self.ca), pass_fds=(self._key_pipe,), on_line=self.monitor.line)
                self.proxy.launch()
                self.origins = Child("origins", origins_command(self.catalog, built=True, fd=listener.fileno(),
                                                                access_log=self.session_dir / ACCESS_LOG),
                                     ORIGINS_READY, self.session_dir / ORIGINS_LOG, pass_fds=(listener.fileno(),))
                self.origins.launch()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop what `launch` started (for a caller that fails before it enters the stack)."""
        for child in (self.proxy, self.origins):
            if child is not None:
                child.stop()
        if self._key_pipe is not None:
            os.close(self._key_pipe)
            self._key_pipe = None

    def __enter__(self) -> "Stack":
        if self._key_pipe is None:
            self.launch()
        try:
            self.origin_url = self.origins.wait_ready().group(1)
            self.log(f"origins on {self.origin_url}")
            self.proxy_url = self.proxy.wait_ready().group(1)
        except BaseException:
            self.stop()
            raise
        os.close(self._key_pipe)  # the proxy has read it: it is ready
        self._key_pipe = None
        self.log(f"proxy on {self.proxy_url}, capturing into {self.session_dir / LOG_NAME}")
        return self

    def __exit__(self, *exc) -> None:
        self.exits["proxy"] = self.proxy.stop()
        self.exits["origins"] = self.origins.stop()
        self.settlement = settle(self.session_dir, self.monitor, Signer(self.signing_key),
                                 self.exits["proxy"], self.key_fingerprint, self.tool)


class Interrupts:
    """Ctrl-C and SIGTERM from the moment this is entered (also when started in the background, where
    SIGINT may be ignored): one that comes while the stack starts is kept, not lost, and `wait` then
    returns at once; one that comes while waiting ends the wait."""

    def __enter__(self) -> "Interrupts":
        self.requested, self.waiting = False, False
        self.previous = {sig: signal.signal(sig, self.interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)

    def interrupt(self, signum, frame) -> None:
        self.requested = True
        if self.waiting:
            raise KeyboardInterrupt

    def wait(self, child: Child | None = None) -> int | None:
        """Block until an interrupt (None), or until `child` exits by itself (its exit code)."""
        self.waiting = True
        try:
            while not self.requested:
                time.sleep(0.2)
                if child is not None and child.exited() is not None:
                    return child.exited()
        except KeyboardInterrupt:
            pass
        finally:
            self.waiting = False
        return None
