"""Wall time and peak memory of whole runs: one scripted run per framework, and the smoke matrix
at --jobs 1 and --jobs 2, against an anchor measured in the same run (headless Chromium starting,
loading a page and quitting).

    python bench/bench_runs.py [--skip-matrix] [--repeat N]

Peak memory is the largest sum of the resident set sizes of the command and all its
descendants (agent, Chromium, proxy, origins), sampled every 0.1 s. For the single runs the
agent's own time (meta.json `agent_seconds`: from starting the agent to its exit) is shown apart
from the wall time, which adds our start-up (catalog, origins, proxy) and sealing; with
--repeat N each single run is made N times and the medians are shown. The load average
(/proc/loadavg, 1 minute) before and after tells how busy the machine was.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from spillage.proxy.layout import META_NAME

REPO = Path(__file__).resolve().parent.parent
SPILLAGE = [sys.executable, "-m", "spillage.runner.cli"]


def measure(argv: list[str], cwd: Path) -> tuple[float, float, str, tuple[float, float]]:
    """(seconds, peak MB of the process tree, its last line on stdout, (start, end) on the wall
    clock) of running `argv`; exits on failure."""
    began, wall_began = time.perf_counter(), time.time()
    process = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peak, done = [0], threading.Event()

    def sample() -> None:
        root = psutil.Process(process.pid)
        while not done.is_set():
            try:
                tree = [root, *root.children(recursive=True)]
                peak[0] = max(peak[0], sum(p.memory_info().rss for p in tree if p.is_running()))
            except psutil.Error:
                pass
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = process.communicate()
    done.set()
    sampler.join()
    seconds = time.perf_counter() - began
    if process.returncode != 0:
        sys.exit(f"bench: {' '.join(argv)} exited {process.returncode}: {err.decode()[-2000:]}")
    lines = out.decode().strip().splitlines()
    return seconds, peak[0] / 2**20, lines[-1] if lines else "", (wall_began, time.time())


def timeline(session: str, began: float, ended: float) -> dict[str, float]:
    """Where a run's wall time went, from the capture's own clock: until the proxy is up (our
    start-up), until the browser's first request, the agent's steps (first to last request), until
    the log is closed (the agent's exit and tear-down), and until the command exits (sealing, meta)."""
    from datetime import datetime

    from spillage.proxy.capturelog import iter_records

    stamps = {}
    for line in iter_records(Path(session)):
        kind, ts = line.record["kind"], datetime.fromisoformat(line.record["ts"].replace("Z", "+00:00")).timestamp()
        if kind == "session_start":
            stamps["proxy up"] = ts
        elif kind in ("request", "egress_blocked"):
            stamps.setdefault("first request", ts)
            stamps["last request"] = ts
        elif kind == "session_end":
            stamps["log closed"] = ts
    marks = [("start-up", began), ("browser", stamps["proxy up"]), ("steps", stamps["first request"]),
             ("after the last request", stamps["last request"]), ("sealing", stamps["log closed"]), ("", ended)]
    return {name: later - at for (name, at), (_, later) in zip(marks, marks[1:])}


def agent_seconds(session: str) -> float:
    """How long the agent of the session at `session` ran, as meta.json records it."""
    return json.loads((Path(session) / META_NAME).read_text(encoding="utf-8"))["agent_seconds"]


def load() -> str:
    return Path("/proc/loadavg").read_text().split()[0] if os.path.exists("/proc/loadavg") else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--skip-matrix", action="store_true", help="only the single runs")
    parser.add_argument("--repeat", type=int, default=1, metavar="N", help="make each single run N times (medians)")
    args = parser.parse_args()
    chromium = shutil.which("chromium") or sys.exit("bench: chromium not found")
    load_before = load()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        home = ["--home", str(tmp / "home")]
        anchor, anchor_mb, _, _ = measure([chromium, "--headless", "--no-sandbox", f"--user-data-dir={tmp / 'profile'}",
                                        "--dump-dom", "data:text/html,<p>anchor</p>"], tmp)
        rows = [("anchor: headless Chromium start, one page, quit", anchor, None, anchor_mb)]
        spent = {}
        for framework in ("browser-use", "autogen"):
            runs = [measure([*SPILLAGE, *home, "run", "--scenario", "shop-kettle-chat", "--agent", framework,
                             "--model", "scripted:oversharer", "--runs-dir", str(tmp / "runs")], tmp)
                    for _ in range(args.repeat)]
            rows.append((f"one run, {framework}, scripted:oversharer, shop-kettle-chat"
                         + (f" (median of {args.repeat})" if args.repeat > 1 else ""),
                         statistics.median(r[0] for r in runs), statistics.median(agent_seconds(r[2]) for r in runs),
                         max(r[1] for r in runs)))
            parts = [timeline(r[2], *r[3]) for r in runs]
            spent[framework] = {name: statistics.median(p[name] for p in parts) for name in parts[0]}
        if not args.skip_matrix:
            for jobs in (1, 2):
                seconds, mb, _, _ = measure([*SPILLAGE, *home, "batch", str(REPO / "matrices" / "smoke.yaml"),
                                          "--jobs", str(jobs), "--runs-dir", str(tmp / f"smoke-{jobs}")], tmp)
                rows.append((f"smoke matrix (8 runs), --jobs {jobs}", seconds, None, mb))
    print("| what | wall time | agent | × anchor | peak memory |")
    print("|---|---:|---:|---:|---:|")
    for what, seconds, agent, mb in rows:
        print(f"| {what} | {seconds:.1f} s | {'' if agent is None else f'{agent:.1f} s'} | {seconds / anchor:.1f} "
              f"| {mb:.0f} MB |")
    print("\nwhere a single run's wall time goes (medians, s):")
    for framework, parts in spent.items():
        print(f"  {framework}: " + ", ".join(f"{name} {seconds:.1f}" for name, seconds in parts.items()))
    print(f"load average (1 min): {load_before} before, {load()} after")


if __name__ == "__main__":
    main()
