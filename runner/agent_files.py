"""What the runner reads of the agent's work folder once the agent is done, where the agent could have put
anything under the names the runner reads (docs/EVIDENCE.md, "Isolation").

Its stderr is read through the descriptor the runner opened for it, whatever the name now holds; what
the agent writes itself (outcome.json) is read only when it is a regular file of its own in the folder,
never through a link, never blocking on a FIFO or a device, and only its first few KB. What is refused
is said, not read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

TAIL_BYTES = 8192   # of a file the agent wrote: its last line, a short report


class Refused(Exception):
    """A file the agent left is not one the runner reads; the message says what it is."""


def tail(fd: int, limit: int = TAIL_BYTES) -> bytes:
    """The last `limit` bytes of the open file `fd` (its offset untouched)."""
    size = os.fstat(fd).st_size
    return os.pread(fd, min(limit, size), max(0, size - limit))


def what_it_is(found: os.stat_result) -> str | None:
    """What a file the agent left is when it is not a regular file of its own (None when it is one)."""
    mode = found.st_mode
    kinds = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a folder"),
             (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))
    kind = next((name for test, name in kinds if test(mode)), None)
    if kind is None and found.st_nlink != 1:
        return "a hard link to a file elsewhere"
    return kind


def read_head(folder: Path, name: str, limit: int = TAIL_BYTES) -> bytes:
    """The first `limit` bytes of `name` in `folder`; FileNotFoundError when there is none, Refused when it
    is not a regular file of its own there."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    where = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        try:
            fd = os.open(name, flags, dir_fd=where)
        except OSError as e:
            if isinstance(e, FileNotFoundError):
                raise
            found = os.stat(name, dir_fd=where, follow_symlinks=False)
            raise Refused(f"{name} is {what_it_is(found) or 'unreadable'}, not a file: not read") from None
    finally:
        os.close(where)
    try:
        kind = what_it_is(os.fstat(fd))
        if kind is not None:
            raise Refused(f"{name} is {kind}, not a file: not read")
        return os.read(fd, limit)
    finally:
        os.close(fd)


def replaced(folder: Path, name: str, fd: int) -> str | None:
    """What the agent put under `name` in `folder` in place of the file `fd` the runner opened there, or
    None when it is still that file."""
    try:
        found = os.lstat(folder / name)
    except FileNotFoundError:
        return f"{name} was removed by the agent; read from the file the runner opened"
    if os.path.samestat(found, os.fstat(fd)):
        return None
    return f"{name} was replaced by the agent with {what_it_is(found) or 'another file'}; read from the file the runner opened"
