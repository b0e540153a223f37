"""Child processes that announce readiness with one line on stdout (origins, proxy)."""

import re
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from spillage.runner.supervisor import Supervisor


class ChildError(RuntimeError):
    """A child process failed to start or stopped unexpectedly."""


class Child:
    """Start `argv` (runner/supervisor.py), wait for a stdout line matching `ready`, tee all output to
    `log_path`.

    Use as a context manager: the child is stopped (SIGTERM to its group, then SIGKILL) on exit.
    """

    def __init__(self, name: str, argv: list[str], ready: str, log_path: Path,
                 env: dict | None = None, timeout: float = 30.0, pass_fds: tuple[int, ...] = (),
                 on_line: Callable[[str], None] | None = None):
        self.name = name
        self.pass_fds = pass_fds
        self.on_line = on_line
        self.argv = argv
        self.ready = re.compile(ready)
        self.log_path = log_path
        self.env = env
        self.timeout = timeout
        self.match: re.Match | None = None
        self.supervisor: Supervisor | None = None
        self._pump: threading.Thread | None = None
        self._ready = threading.Event()

    def __enter__(self) -> "Child":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> re.Match:
        """Start the child and block until it prints its ready line; returns the match."""
        self.launch()
        return self.wait_ready()

    def launch(self) -> None:
        """Start the child without waiting for it (several can start at once; then `wait_ready`)."""
        self.supervisor = Supervisor(self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=self.env,
                                     text=True, errors="replace", pass_fds=self.pass_fds)
        self._pump = threading.Thread(target=self._copy_output, daemon=True)
        self._pump.start()

    def wait_ready(self) -> re.Match:
        """Block until the launched child prints its ready line; the match. ChildError (and the
        child stopped) when it exits or is not ready within its timeout."""
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self.match

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.timeout
        while not self._ready.wait(0.05):
            if self.supervisor.poll() is not None:
                self._pump.join(1)
                raise ChildError(f"{self.name} {self.supervisor.ended()} before it was "
                                 f"ready; its output is in {self.log_path}: {self.tail()}")
            if time.monotonic() > deadline:
                raise ChildError(f"{self.name} not ready after {self.timeout:.0f} s; "
                                 f"its output is in {self.log_path}: {self.tail()}")

    def _copy_output(self) -> None:
        with open(self.log_path, "a", encoding="utf-8") as log:
            for line in self.supervisor.process.stdout:
                log.write(line)
                log.flush()
                if self.on_line is not None:
                    self.on_line(line)
                if not self._ready.is_set():
                    self.match = self.ready.search(line)
                    if self.match:
                        self._ready.set()

    def exited(self) -> int | None:
        """The child's exit code once it has exited by itself, else None."""
        return None if self.supervisor is None else self.supervisor.poll()

    def tail(self, lines: int = 3) -> str:
        """The last lines the child printed, joined on one line."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return "(no output)"
        return " | ".join(text.strip().splitlines()[-lines:]) or "(no output)"

    def stop(self, timeout: float = 15.0) -> int | None:
        """Ask the child to stop (SIGTERM to its group), kill it after `timeout` s; returns its exit code."""
        if self.supervisor is None:
            return None
        code = self.supervisor.stop(timeout)
        if self._pump:
            self._pump.join(5)
        return code
