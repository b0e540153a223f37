"""The servers a session needs: origins and the capturing proxy, started and stopped together."""

import shutil
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from spillage.audit.session_audit import CATALOG_COPY
from spillage.origins.catalog import build_catalog
from spillage.proxy.ca import CertAuthority
from spillage.proxy.capturelog import CaptureError
from spillage.proxy.capturelog import CaptureWriter
from spillage.proxy.launcher import mitmdump_command
from spillage.proxy.capturelog import LOG_NAME
from spillage.proxy.verify import verify
from spillage.runner.children import Child

ORIGINS_READY = r"spillage origins listening on (http://127\.0\.0\.1:(\d+))"
PROXY_READY = r"spillage proxy listening on (http://\S+)"


def origins_command(catalog: Path, built: bool = False) -> list[str]:
    """argv for our origin server on a free loopback port: it builds the benchmark's catalog into
    `catalog`, or serves `catalog` as it is when `built`."""
    return [sys.executable, "-m", "spillage.origins.server", "--port", "0",
            "--from-catalog" if built else "--catalog", str(catalog)]


@dataclass
class Stack:
    """Origins + proxy for one session folder. `with Stack(...) as s:` then use `s.proxy_url`.

    The catalog the origins serve is built into the session folder first, from `scenarios`
    (default: the benchmark's) with `seed`, so the audit later reads the very site the agent saw;
    or it is a copy of `catalog`, an existing catalog file (a replay serves the original's)."""

    session_dir: Path
    ca: CertAuthority
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

    def __enter__(self) -> "Stack":
        catalog = self.session_dir / CATALOG_COPY
        if self.catalog is not None:
            shutil.copyfile(self.catalog, catalog)
        else:
            build_catalog(catalog, self.scenarios, self.seed)
        self.origins = Child("origins", origins_command(catalog, built=True),
                             ORIGINS_READY, self.session_dir / "origins.log")
        self.origin_url = self.origins.start().group(1)
        self.log(f"origins on {self.origin_url}")
        origin = self.origin_url.removeprefix("http://")
        argv = mitmdump_command(self.ca, origin, self.session_dir, self.proxy_port, self.inline_limit,
                                self.model_hosts)
        self.proxy = Child("proxy", argv, PROXY_READY, self.session_dir / "proxy.log")
        try:
            self.proxy_url = self.proxy.start().group(1)
        except BaseException:
            self.origins.stop()
            raise
        self.log(f"proxy on {self.proxy_url}, capturing into {self.session_dir / LOG_NAME}")
        return self

    def __exit__(self, *exc) -> None:
        self.exits["proxy"] = self.proxy.stop()
        self.exits["origins"] = self.origins.stop()
        self.seal()

    def seal(self) -> None:
        """Make sure the log ends with `session_end`, appending one if the proxy could not."""
        result = verify(self.session_dir)
        if result.ok or result.damage != "truncated":
            return
        try:
            with CaptureWriter.resume(self.session_dir) as writer:
                writer.append("session_end", records=writer.count,
                              reason=f"sealed by runner after proxy exit ({self.exits.get('proxy')})")
        except CaptureError as e:
            self.log(f"cannot seal the capture log: {e}")


def wait_for_interrupt() -> None:
    """Block until Ctrl-C or SIGTERM (also when started in the background, where SIGINT may be ignored)."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
