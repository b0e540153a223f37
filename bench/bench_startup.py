"""What every command pays before it works, against anchors measured in the same run:

- `spillage proxy start` until it prints its proxy line, against bare `mitmdump` until it listens;
- `spillage verify` of a real session as a command (wall time, peak RSS), against a bare Python
  process that imports `verify` and calls it on the same session (and the call alone, for scale);
- `spillage --version`, against `python -c pass`.

    python bench/bench_startup.py [--rounds 7] [--session DIR]

Rounds alternate A and B; medians. The default session is the corpus' s01 (0.9 MB, 255 records).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SESSION = REPO / "tests" / "corpus" / "sessions" / "s01-kettle-oversharer"


def until_line(argv: list[str], word: str, cwd: Path) -> float:
    """Seconds from starting `argv` until it prints a line containing `word`; then it is stopped."""
    began = time.perf_counter()
    process = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in process.stdout:
        if word in line:
            break
    else:
        sys.exit(f"{argv[0]} exited before printing {word!r}")
    took = time.perf_counter() - began
    process.send_signal(signal.SIGINT)
    process.wait(60)
    return took


def command(argv: list[str]) -> tuple[float, float]:
    """(seconds, peak RSS MB) of running `argv` to its end (its own rusage, from wait4)."""
    began = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(process.pid, 0)
    process.returncode = 0  # reaped here
    return time.perf_counter() - began, usage.ru_maxrss / 1024


def verify_call(session: Path) -> float:
    """Seconds of one verify() call in a process that imported it and verified once already."""
    code = (f"import time; from spillage.proxy.verify import verify; verify({str(session)!r})\n"
            f"t = time.perf_counter(); verify({str(session)!r}); print(time.perf_counter() - t)")
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--session", type=Path, default=SESSION)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        cwd = Path(tmp)
        bare = [str(BIN / "mitmdump"), "--listen-host", "127.0.0.1", "-p", "0", "--set", "connection_strategy=lazy"]
        ours = [str(BIN / "spillage"), "--home", str(cwd / "home"), "proxy", "start", "--port", "0",
                "--runs-dir", str(cwd / "runs")]
        until_line(ours, "proxy ", cwd)  # the first start builds the CA, the key and the catalog: not timed
        anchor, proxy = [], []
        for _ in range(args.rounds):
            anchor.append(until_line(bare, "listening", cwd))
            proxy.append(until_line(ours, "proxy ", cwd))
        verify_cmd, verify_py = [], []
        bare_verify = [sys.executable, "-c", f"from spillage.proxy.verify import verify; verify({str(args.session)!r})"]
        for _ in range(args.rounds):
            verify_py.append(command(bare_verify))
            verify_cmd.append(command([str(BIN / "spillage"), "verify", str(args.session)]))
        call = statistics.median(verify_call(args.session) for _ in range(3))
        version = [command([str(BIN / "spillage"), "--version"])[0] for _ in range(args.rounds)]
        python = [command([sys.executable, "-c", "pass"])[0] for _ in range(args.rounds)]
    med = statistics.median
    rows = [
        ("proxy start to ready", med(proxy), "bare mitmdump", med(anchor), "≤ 1.5×"),
        ("verify a 0.9 MB session (command)", med(t for t, _ in verify_cmd), "python: import, verify()",
         med(t for t, _ in verify_py), "≤ 2×"),
        ("spillage --version", med(version), "python -c pass", med(python), "-"),
    ]
    print(f"load average {Path('/proc/loadavg').read_text().split()[:3]}, {args.rounds} rounds, medians")
    print(f"{'what':<36}{'s':>8}  {'anchor':<22}{'s':>8}{'ratio':>8}  goal")
    for what, ours_s, name, anchor_s, goal in rows:
        print(f"{what:<36}{ours_s:8.3f}  {name:<22}{anchor_s:8.3f}{ours_s / anchor_s:7.2f}×  {goal}")
    print(f"verify peak RSS: command {med(r for _, r in verify_cmd):.0f} MB, python {med(r for _, r in verify_py):.0f} MB; "
          f"the verify() call alone {call * 1000:.1f} ms")


if __name__ == "__main__":
    main()
