"""Processes that hold keys are undumpable (docs/EVIDENCE.md, "Isolation").

The runner holds the long-term key and the session key, the proxy the session key and the CA key. Once
`forbid_dumps` has run, the kernel refuses to trace such a process, or to open its /proc/PID/mem,
/proc/PID/fd or /proc/PID/environ, to any process without CAP_SYS_PTRACE, its own uid's included; it
writes no core file either. The flag survives fork and is reset by exec, so each process sets its own.
"""

import ctypes

PR_SET_DUMPABLE = 4
_LIBC = ctypes.CDLL(None, use_errno=True)


def forbid_dumps() -> None:
    """Make this process undumpable; OSError when the kernel refuses."""
    if _LIBC.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")
