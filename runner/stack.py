"""The servers a session needs: origins and the capturing proxy, started and stopped together, and the
settlement of the evidence once they have stopped."""

import os
import shutil
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from spillage.origins.catalog import build_catalog
from spillage.proxy.capturelog import utc_timestamp
from spillage.proxy.layout import CATALOG_COPY
from spillage.proxy.layout import LOG_NAME
from spillage.proxy.layout import ORIGINS_LOG
from spillage.proxy.layout import PROXY_LOG
from spillage.proxy.mitm.ca import CertAuthority
from spillage.proxy.mitm.launcher import mitmdump_command
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


def origins_command(catalog: Path, built: bool = False) -> list[str]:
    """argv for our origin server on a free loopback port: it builds the benchmark's catalog into
    `catalog`, or serves `catalog` as it is when `built`."""
    return [sys.executable, "-m", "spillage.origins.server", "--port", "0",
            "--from-catalog" if built else "--catalog", str(catalog)]


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

    The catalog the origins serve is built into the session folder first, from `scenarios`
    (default: the benchmark's) with `seed`, so the audit later reads the very site the agent saw;
    or it is a copy of `catalog`, an existing catalog file (a replay serves the original's).

    The proxy signs the log with a session key made here and certified by `signing_key`; it gets the
    key over a pipe and reports each signed checkpoint on its stdout (runner/heads.py). On exit, once
    both servers have stopped, `settlement` says whether the log on disk is what the proxy wrote."""

    session_dir: Path
    ca: CertAuthority
    signing_key: object               # the long-term Ed25519 key (proxy.signing.load_or_create_key)
    tool: str = "spillage run"        # who seals the log if the proxy dies first
    scenarios: list | None = None
    seed: int = 0
    catalog: Path | None = None
    proxy_port: int = 0
    inline_limit: int | None = None
    model_hosts: tuple[str, ...] = ()  # model endpoints the proxy lets through (--model-via-proxy)
    log: Callable[[str], None] = print
    origin_url: str = ""
    proxy_url: str = ""
    exits: dict = field(default_factory=dict)
    settlement: Settlement | None = None

    @property
    def key_fingerprint(self) -> str:
        """Fingerprint of the long-term key that certifies this session's key."""
        return fingerprint(raw_public(self.signing_key))

    def __enter__(self) -> "Stack":
        catalog = self.session_dir / CATALOG_COPY
        if self.catalog is not None:
            shutil.copyfile(self.catalog, catalog)
        else:
            build_catalog(catalog, self.scenarios, self.seed)
        self.origins = Child("origins", origins_command(catalog, built=True),
                             ORIGINS_READY, self.session_dir / ORIGINS_LOG)
        self.origin_url = self.origins.start().group(1)
        self.log(f"origins on {self.origin_url}")
        self.session_key = SessionKey.issue(self.signing_key, self.session_dir.name, utc_timestamp())
        self.monitor = HeadMonitor(self.session_key)
        read_end = key_pipe(self.session_key)
        origin = self.origin_url.removeprefix("http://")
        argv = mitmdump_command(self.ca, origin, self.session_dir, self.proxy_port, self.inline_limit,
                                self.model_hosts, read_end)
        self.proxy = Child("proxy", argv, PROXY_READY, self.session_dir / PROXY_LOG,
                           pass_fds=(read_end,), on_line=self.monitor.line)
        try:
            self.proxy_url = self.proxy.start().group(1)
        except BaseException:
            self.origins.stop()
            raise
        finally:
            os.close(read_end)
        self.log(f"proxy on {self.proxy_url}, capturing into {self.session_dir / LOG_NAME}")
        return self

    def __exit__(self, *exc) -> None:
        self.exits["proxy"] = self.proxy.stop()
        self.exits["origins"] = self.origins.stop()
        self.settlement = settle(self.session_dir, self.monitor, Signer(self.signing_key),
                                 self.exits["proxy"], self.key_fingerprint, self.tool)


def wait_for_interrupt(child: Child | None = None) -> int | None:
    """Block until Ctrl-C or SIGTERM (also when started in the background, where SIGINT may be ignored),
    or until `child` exits by itself; its exit code then, else None."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while True:
            time.sleep(0.2)
            if child is not None and child.exited() is not None:
                return child.exited()
    except KeyboardInterrupt:
        return None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
