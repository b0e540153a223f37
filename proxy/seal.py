"""Seal a log whose writer died before it could (`spillage seal`, and the runner after a proxy crash).

The seal never rewrites history. A torn last line (a record the writer was cut off in) is moved, byte
for byte, to `capture.torn`, and its size and SHA-256 are named in the seal. The seal itself is a
`crash_seal` record saying why, by whom and how far the writer's own signatures reach, followed, in a
signed log, by a checkpoint signed with the sealer's long-term key, which is also written beside the log
as a C2SP note (`checkpoint.note`). `spillage verify` reports such a log as "truncated, sealed after
crash", naming the key that signed the seal, never as clean.
"""

from __future__ import annotations

import fcntl
import getpass
import hashlib
import json
import os
import socket
from pathlib import Path

from spillage.proxy.capturelog import CaptureError
from spillage.proxy.capturelog import CaptureWriter
from spillage.proxy.capturelog import TornLineError
from spillage.proxy.capturelog import intact_chain
from spillage.proxy.layout import LOG_NAME
from spillage.proxy.layout import TORN_TAIL
from spillage.proxy.layout import WRITING_MODE
from spillage.proxy.layout import write_checkpoint_note
from spillage.proxy.signing import Signer
from spillage.proxy.signing import fingerprint
from spillage.proxy.signing import unb64


class SealError(Exception):
    """The log cannot be sealed (still written, already sealed, damaged); the message says why."""


def writer_holds(log: Path) -> bool:
    """True while a live writer holds the log (its exclusive lock, see capturelog.CaptureWriter)."""
    with open(log, "rb") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
    return False


def sealer_identity(tool: str, signer: Signer | None) -> dict:
    """Who seals: the tool, the user and host, the process, and the fingerprint of the signing key."""
    return {"tool": tool, "user": getpass.getuser(), "host": socket.gethostname(), "pid": os.getpid(),
            "key": fingerprint(unb64(signer.key) or b"") if signer else None}


def torn_tail_length(log: Path) -> int:
    """How many bytes at the end of the log are not a whole record: those after the last newline, or
    the last line itself when it does not parse."""
    with open(log, "rb") as f:
        end = f.seek(0, os.SEEK_END)
        last_newline = _last_newline(f, end)
        if last_newline + 1 < end:
            return end - last_newline - 1
        if last_newline < 0:
            return 0
        start = _last_newline(f, last_newline) + 1
        f.seek(start)
        line = f.read(last_newline - start)
    try:
        json.loads(line)
    except (ValueError, RecursionError):
        return end - start
    return 0


def _last_newline(f, before: int, chunk: int = 1 << 16) -> int:
    """Offset of the last newline before offset `before`, or -1."""
    pos = before
    while pos > 0:
        step = min(chunk, pos)
        f.seek(pos - step)
        at = f.read(step).rfind(b"\n")
        if at >= 0:
            return pos - step + at
        pos -= step
    return -1


def move_torn_tail(session_dir: Path) -> dict | None:
    """Move a torn last line to capture.torn (0600, never overwritten) and cut it off the log; what
    was moved ({file, size, sha256}), or None when the log ends in a whole record."""
    log = session_dir / LOG_NAME
    n = torn_tail_length(log)
    if n == 0:
        return None
    with open(log, "r+b") as f:
        f.seek(-n, os.SEEK_END)
        tail = f.read()
        fd = os.open(session_dir / TORN_TAIL, os.O_WRONLY | os.O_CREAT | os.O_EXCL, WRITING_MODE)
        with open(fd, "wb") as out:
            out.write(tail)
            out.flush()
            os.fsync(out.fileno())
        f.truncate(f.seek(-n, os.SEEK_END))
        f.flush()
        os.fsync(f.fileno())
    return {"file": TORN_TAIL, "size": n, "sha256": hashlib.sha256(tail).hexdigest()}


def seal_crashed(session_dir: Path, signer: Signer | None, tool: str, reason: str) -> dict:
    """Seal the crashed log of `session_dir`; the crash_seal record. `signer` signs the final
    checkpoint of a signed log (SealError without one). SealError for a log that is still being
    written, already sealed, or damaged before its end."""
    session_dir = Path(session_dir)
    log = session_dir / LOG_NAME
    if not log.is_file():
        raise SealError(f"{log}: no capture log here")
    if writer_holds(log):
        raise SealError(f"{log}: the proxy is still writing this log; stop it first")
    if (session_dir / TORN_TAIL).exists():
        raise SealError(f"{session_dir / TORN_TAIL} exists already: this log was being sealed before; "
                        "run `spillage verify` on it")
    try:
        intact_chain(log)
    except TornLineError:
        pass  # moved aside below
    except CaptureError as exc:
        raise SealError(f"cannot seal: {exc}") from None
    torn = move_torn_tail(session_dir)
    try:
        state = intact_chain(log)
    except CaptureError as exc:
        raise SealError(f"cannot seal: {exc}") from None
    if state.signed and signer is None:
        raise SealError(f"{log}: a signed log needs a key to seal it")
    final: list[dict] = []
    with CaptureWriter.resume(session_dir, signer if state.signed else None,
                              on_checkpoint=lambda record, last: final.append(record)) as writer:
        sealed = writer.append("crash_seal", reason=reason, records=writer.count,
                               by=sealer_identity(tool, signer if state.signed else None),
                               last_signed=state.last_signed, torn_tail=torn)
    if final:   # the seal's checkpoint, signed by the sealer, as a C2SP note beside the log
        write_checkpoint_note(session_dir, final[-1]["note"])
    return sealed
