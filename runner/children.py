"""Child processes that announce readiness with one line on stdout (origins, proxy)."""

import ctypes
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded here: the forked child only calls into it


def dies_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A preexec_fn that has the kernel send `sig` to the child when the process that started it dies
    (kill -9 included), so no origins server or proxy outlives its runner. Start the child from the
    main thread: the signal follows the thread that forked."""
    parent = os.getpid()

    def preexec() -> None:
        _LIBC.prctl(PR_SET_PDEATHSIG, sig)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), sig)

    return preexec


class ChildError(RuntimeError):
    """A child process failed to start or stopped unexpectedly."""


class Child:
    """Start `argv`, wait for a stdout line matching `ready`, tee all output to `log_path`.

    Use as a context manager: the child is stopped (SIGTERM, then SIGKILL) on exit.
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
        self.process: subprocess.Popen | None = None
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
        self.process = subprocess.Popen(
            self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, env=self.env, text=True, errors="replace",
            pass_fds=self.pass_fds, preexec_fn=dies_with_parent(),
        )
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
            if self.process.poll() is not None:
                self._pump.join(1)
                raise ChildError(f"{self.name} exited with {self.process.returncode} before it was "
                                 f"ready; its output is in {self.log_path}: {self.tail()}")
            if time.monotonic() > deadline:
                raise ChildError(f"{self.name} not ready after {self.timeout:.0f} s; "
                                 f"its output is in {self.log_path}: {self.tail()}")

    def _copy_output(self) -> None:
        with open(self.log_path, "a", encoding="utf-8") as log:
            for line in self.process.stdout:
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
        return None if self.process is None else self.process.poll()

    def tail(self, lines: int = 3) -> str:
        """The last lines the child printed, joined on one line."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return "(no output)"
        return " | ".join(text.strip().splitlines()[-lines:]) or "(no output)"

    def stop(self, timeout: float = 15.0) -> int | None:
        """Ask the child to stop (SIGTERM), kill it after `timeout` s; returns its exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._pump:
            self._pump.join(5)
        return self.process.returncode
