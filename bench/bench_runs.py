"""Wall time and peak memory of whole runs: one scripted run per framework, and the smoke matrix
at --jobs 1 and --jobs 2, against an anchor measured in the same run (headless Chromium starting,
loading a page and quitting).

    python bench/bench_runs.py [--skip-matrix]

Peak memory is the largest sum of the resident set sizes of the command and all its
descendants (agent, Chromium, proxy, origins), sampled every 0.1 s.
"""

import argparse
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
SPILLAGE = [sys.executable, "-m", "spillage.runner.cli"]


def measure(argv: list[str], cwd: Path) -> tuple[float, float]:
    """(seconds, peak MB of the process tree) of running `argv`; exits on failure."""
    began = time.perf_counter()
    process = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
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
    _, err = process.communicate()
    done.set()
    sampler.join()
    seconds = time.perf_counter() - began
    if process.returncode != 0:
        sys.exit(f"bench: {' '.join(argv)} exited {process.returncode}: {err.decode()[-2000:]}")
    return seconds, peak[0] / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--skip-matrix", action="store_true", help="only the single runs")
    args = parser.parse_args()
    chromium = shutil.which("chromium") or sys.exit("bench: chromium not found")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        home = ["--home", str(tmp / "home")]
        anchor, anchor_mb = measure([chromium, "--headless", "--no-sandbox", f"--user-data-dir={tmp / 'profile'}",
                                     "--dump-dom", "data:text/html,<p>anchor</p>"], tmp)
        rows = [("anchor: headless Chromium start, one page, quit", anchor, anchor_mb)]
        for framework in ("browser-use", "autogen"):
            seconds, mb = measure([*SPILLAGE, *home, "run", "--scenario", "shop-kettle-chat", "--agent", framework,
                                   "--model", "scripted:oversharer", "--runs-dir", str(tmp / "runs")], tmp)
            rows.append((f"one run, {framework}, scripted:oversharer, shop-kettle-chat", seconds, mb))
        if not args.skip_matrix:
            for jobs in (1, 2):
                seconds, mb = measure([*SPILLAGE, *home, "batch", str(REPO / "matrices" / "smoke.yaml"),
                                       "--jobs", str(jobs), "--runs-dir", str(tmp / f"smoke-{jobs}")], tmp)
                rows.append((f"smoke matrix (8 runs), --jobs {jobs}", seconds, mb))
    print("| what | wall time | × anchor | peak memory |")
    print("|---|---:|---:|---:|")
    for what, seconds, mb in rows:
        print(f"| {what} | {seconds:.1f} s | {seconds / anchor:.1f} | {mb:.0f} MB |")


if __name__ == "__main__":
    main()
