"""An agent that tries every attack of issue 25 on the evidence of its own session (tests/test_isolation.py).

    python hostile.py command      the agent itself: attacks, then one request through the proxy
    python hostile.py browser      run from the Chromium the framework starts (hostile_chromium.sh)
    python hostile.py linger M     the child it leaves behind (marker M): it holds the sandbox's first process
                                   stopped, and after the seal it rewrites the log

Standard library only, so that any Python runs it (the framework's, or the system's from Chromium's
wrapper). It finds everything as an attacker would: the session folder beside its work folder, the
spillage home from $SPILLAGE_HOSTILE_HOME, the proxy and the runner by scanning /proc. Each attack is one
line in $SPILLAGE_WORK/hostile.txt: `DID: what` or `refused: what: why`.
"""

import ctypes
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

WORK = Path(os.environ["SPILLAGE_WORK"])
SESSION = WORK.parent.parent / WORK.name
HOME = Path(os.environ.get("SPILLAGE_HOSTILE_HOME", "/nonexistent"))
REPORT = WORK / "hostile.txt"
FAKE_SEAL = 'spillage sealed {"kind":"checkpoint","records":1}\n'


def say(line: str) -> None:
    with open(REPORT, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def attempt(what: str, action) -> None:
    """Run one attack; it says what it got, or raises to say why it failed."""
    try:
        got = action()
    except Exception as e:  # noqa: BLE001 - every failure is a refusal to report
        say(f"refused: {what}: {type(e).__name__}: {e}")
    else:
        say(f"DID: {what}" + (f" ({got})" if got else ""))


def processes(needle: str, without: str = "\0never\0") -> list[int]:
    """Pids whose command line holds `needle` (and not `without`), as /proc shows them here."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            except OSError:
                continue
            if needle in cmdline and without not in cmdline:
                found.append(int(entry.name))
    return found


def one(needle: str, without: str = "\0never\0") -> int:
    pids = processes(needle, without)
    if not pids:
        raise LookupError(f"no process with {needle!r} in its command line is visible")
    return pids[0]


def proxy() -> int:
    return one("mitmdump")


def runner() -> int:
    return one(" run --scenario ", without="hostile")


def read_memory(pid: int) -> str:
    maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
    start = int(next(line for line in maps if line.split()[1].startswith("r")).split("-")[0], 16)
    with open(f"/proc/{pid}/mem", "rb") as mem:
        mem.seek(start)
        return f"{len(mem.read(64))} bytes of pid {pid}"


def trace(pid: int) -> str:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(16, pid, None, None) != 0:   # PTRACE_ATTACH
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    os.waitpid(pid, 0)
    libc.ptrace(17, pid, None, None)             # PTRACE_DETACH
    return f"pid {pid}"


def write_proxy_pipe() -> str:
    with open(f"/proc/{proxy()}/fd/1", "w") as pipe:
        pipe.write(FAKE_SEAL)
    return "a fake seal report"


def open_runner_end() -> str:
    target = os.readlink(f"/proc/{proxy()}/fd/1")
    folder = Path(f"/proc/{runner()}/fd")
    for fd in folder.iterdir():
        if os.readlink(fd) == target:
            os.close(os.open(fd, os.O_RDONLY | os.O_NONBLOCK))
            return f"fd {fd.name} of the runner"
    raise LookupError("no fd of the runner is the proxy's stdout")


def write_session() -> str:
    with open(SESSION / "capture.jsonl", "ab") as log:
        log.write(b'{"forged": true}\n')
    (SESSION / "meta.json").write_text(json.dumps({"session": SESSION.name, "evidence": "sealed"}))
    return str(SESSION)


def reach_other() -> str:
    host, port = os.environ["SPILLAGE_HOSTILE_TARGET"].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"GET /?q=escaped HTTP/1.0\r\n\r\n")
    return "sent a request past the proxy"


def leave_child(marker: str) -> str:
    child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "linger", marker], start_new_session=True,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    child.stdout.readline()   # it has started, in a session of its own
    return f"marker {marker}"


def hold_first() -> str:
    """Trace the sandbox's first process (bubblewrap's) and stop it, so that it cannot exit when the agent
    does and take the sandbox with it; kept so while this process lives."""
    if "bwrap" not in Path("/proc/1/cmdline").read_text(errors="replace"):
        raise LookupError("not in a sandbox: pid 1 is the machine's own")
    libc = ctypes.CDLL(None, use_errno=True)
    for request in (0x4206, 0x4207):   # PTRACE_SEIZE, PTRACE_INTERRUPT
        if libc.ptrace(request, 1, None, None) != 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return "pid 1 stopped"


def linger() -> None:
    """Outlive the agent (holding the sandbox's first process stopped); once the runner has sealed the
    session, rewrite its log."""
    say("linger: started")
    attempt("hold the sandbox's first process", hold_first)
    print("started", flush=True)
    sys.stdout.close()
    while True:
        try:
            meta = json.loads((SESSION / "meta.json").read_text())
        except (OSError, ValueError):
            meta = {}
        if meta.get("evidence") == "sealed":
            attempt("rewrite the log after the seal", rewrite_after_seal)
            return
        time.sleep(0.1)


def rewrite_after_seal() -> str:
    log = SESSION / "capture.jsonl"
    os.chmod(log, 0o600)
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:3]))
    return f"cut the log to 3 of {len(lines)} lines"


def attack(where: str) -> None:
    say(f"from: {where}, uid {os.getuid()}, pid {os.getpid()}")
    attempt("read the signing key", lambda: f"{len((HOME / 'signing' / 'ed25519.pem').read_bytes())} bytes")
    attempt("read the CA key", lambda: f"{len((HOME / 'ca' / 'mitmproxy-ca.pem').read_bytes())} bytes")
    attempt("read the proxy's memory", lambda: read_memory(proxy()))
    attempt("read the runner's memory", lambda: read_memory(runner()))
    attempt("trace the proxy", lambda: trace(proxy()))
    attempt("write into the proxy's stdout pipe", write_proxy_pipe)
    attempt("open the runner's end of the pipe", open_runner_end)
    attempt("write into the session folder", write_session)
    attempt("reach a listener past the proxy", reach_other)
    attempt("leave a child behind", lambda: leave_child(os.environ["SPILLAGE_HOSTILE_MARKER"]))


if __name__ == "__main__":
    if sys.argv[1] == "linger":
        linger()
    else:
        attack(sys.argv[1])
    if sys.argv[1] == "command":
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": os.environ["SPILLAGE_PROXY"]}))
        opener.open("http://shop.test/s?k=kettle", timeout=10).read()
