"""The one supervisor of the runner's child processes (origins, proxy, agents, sandboxes, batch runs).

A child starts in its own process group and dies with its runner (the kernel's parent-death signal,
kill -9 of the runner included). It is stopped as a group: asked (SIGTERM to the group, or the caller's
own way), then SIGKILLed after a grace period. When it ends, by itself or stopped, whatever is left of
its group (a grandchild that would outlive it) is killed before the child is reaped, while its process
id cannot yet name another group.
"""

import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable

PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded here: the forked child only calls into it
POLL_SECONDS = 0.05


def dies_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A preexec_fn that has the kernel send `sig` to the child when the thread that started it dies
    (kill -9 of its process included), so no child outlives its runner. Start the child from a thread
    that lives as long as the child: the main thread, or one that waits for it."""
    parent = os.getpid()

    def preexec() -> None:
        _LIBC.prctl(PR_SET_PDEATHSIG, sig)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), sig)

    return preexec


class Supervisor:
    """One child process: `argv` started with stdin from /dev/null, in its own process group, dying with
    its parent; `popen` are further subprocess.Popen arguments (stdout, stderr, env, cwd, pass_fds, user,
    text, ...). OSError when it cannot be started."""

    def __init__(self, argv: list[str], **popen):
        self.argv = argv
        self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True,
                                        preexec_fn=dies_with_parent(), **popen)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        """Its exit status once it has ended and been reaped (a negative signal number when killed), else None."""
        return self.process.returncode

    def poll(self) -> int | None:
        """Its exit status if it has ended (what was left of its group killed), else None."""
        try:
            return self.wait(0)
        except subprocess.TimeoutExpired:
            return None

    def wait(self, timeout: float | None = None) -> int:
        """Its exit status once it has ended, within `timeout` s (subprocess.TimeoutExpired after); what is
        left of its group is killed then."""
        if self.process.returncode is None:
            if not self._ended_within(timeout):
                raise subprocess.TimeoutExpired(self.argv, timeout)
            self.signal(signal.SIGKILL)   # its zombie still holds the group's id: no other group is named
            self.process.wait()
        return self.process.returncode

    def _ended_within(self, timeout: float | None) -> bool:
        """Whether the child ends within `timeout` s (None: however long), without reaping it."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                if os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                    return True
            except ChildProcessError:   # reaped already (by Popen): it has ended
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(POLL_SECONDS)

    def signal(self, sig: int, group: bool = True) -> None:
        """Send `sig` to the child's process group (or, not `group`, to the child alone); nothing when gone."""
        try:
            if group:
                os.killpg(self.pid, sig)
            elif self.process.returncode is None:
                self.process.send_signal(sig)
        except (ProcessLookupError, PermissionError):
            pass

    def stop(self, grace: float, ask: Callable[[], None] | None = None) -> int:
        """Ask the child to stop (`ask`; by default SIGTERM to its group), SIGKILL its group if it has not
        ended after `grace` s; its exit status, once nothing of its group is left."""
        if self.poll() is None:
            (ask or (lambda: self.signal(signal.SIGTERM)))()
            try:
                return self.wait(grace)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
        return self.wait()

    def ended(self) -> str:
        """How it ended: 'exited with N', 'killed by SIGNAME', or 'running'."""
        code = self.poll()
        if code is None:
            return "running"
        if code < 0:
            return f"killed by {signal.Signals(-code).name}"
        return f"exited with {code}"
