"""The sandbox's pid namespace, held by a pidfd on its first process (runner/sandbox.py).

bubblewrap says, on its `--info-fd`, which pid the namespace's first process has out here. A pidfd on it
names that process and no other, even once its pid is free again. SIGKILL to it ends the namespace: the
kernel kills every process in it, whether or not one of them holds the first process stopped (a tracer
can keep a process from exiting, never from SIGKILL), and the pidfd turns readable once they are gone.
"""

from __future__ import annotations

import json
import os
import select
import signal
import time
from pathlib import Path

INFO_SECONDS = 30   # for bubblewrap to make the namespace and say so
END_SECONDS = 10    # for the kernel to end every process in it


class PidNamespace:
    """The namespace bubblewrap (`bwrap_pid`) made, as its `--info-fd` (`info_fd`, read here and closed)
    says; `pidfd` is None when bubblewrap made none (it failed) or its first process is gone already."""

    def __init__(self, info_fd: int, bwrap_pid: int) -> None:
        self.pidfd: int | None = None
        pid = read_child_pid(info_fd)
        if pid is None:
            return
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            return
        if parent_of(pid) == bwrap_pid:   # still bubblewrap's child: the pidfd names the namespace's first process
            self.pidfd = pidfd
        else:
            os.close(pidfd)

    def end(self) -> bool:
        """SIGKILL the namespace's first process and wait for every process in it to be gone: False if
        they are still there after END_SECONDS."""
        if self.pidfd is None:
            return True
        try:
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        except ProcessLookupError:
            pass
        gone = bool(select.select([self.pidfd], [], [], END_SECONDS)[0])
        if gone:
            os.close(self.pidfd)
            self.pidfd = None
        return gone


def read_child_pid(fd: int) -> int | None:
    """The `child-pid` of bubblewrap's info (a JSON object), or None if it closes the fd without one."""
    data, deadline = b"", time.monotonic() + INFO_SECONDS
    try:
        while time.monotonic() < deadline:
            if not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                break
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
            try:
                return int(json.loads(data)["child-pid"])
            except (ValueError, KeyError, TypeError):
                continue
    finally:
        os.close(fd)
    return None


def parent_of(pid: int) -> int | None:
    """The parent pid of `pid`, from /proc/PID/stat (None once it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])
