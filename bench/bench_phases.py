"""Where the wall time of a scripted browser-use run goes, phase by phase, against an anchor measured in
the same run (headless Chromium starting, loading a page and quitting; bench_runs.py's):

    python bench/bench_phases.py [--repeat 5] [--before PYTHON]

Each run is `spillage run --scenario shop-kettle-chat --agent browser-use --model scripted:oversharer`
(the sandbox, as `make demo`). The marks on its timeline come from the runner's own lines on stderr,
stamped as they arrive (the session folder made, the agent started, the proxy ready), and from the
capture log's clock (the browser's first request, the first request to our sites, the last one, the log
closed); the command's exit ends it. With --before, the same runs are made with another checkout's
interpreter (its venv's python) too, alternating with ours; medians of each. Wall time is all there
is to compare: most of a run's CPU is spent by processes in the agent's sandbox that no one reaps (the
pid namespace ends them), so the command's rusage leaves it out.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

from bench_runs import load
from bench_runs import measure

from spillage.proxy.capturelog import iter_records

LINES = {"session folder made": "spillage: session ", "agent started": "spillage: agent ",
         "proxy ready": "spillage: proxy on "}
SITES = (".test",)


def run(python: str, workdir: Path) -> dict[str, float]:
    """One run with `python`: the seconds from its start to each mark."""
    argv = [python, "-m", "spillage.runner.cli", "--home", str(workdir / "home"), "run", "--scenario",
            "shop-kettle-chat", "--agent", "browser-use", "--model", "scripted:oversharer",
            "--runs-dir", str(workdir / "runs")]
    workdir.mkdir(exist_ok=True)
    began = time.time()
    process = subprocess.Popen(argv, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    marks: dict[str, float] = {}
    for line in process.stderr:
        for mark, prefix in LINES.items():
            if line.startswith(prefix) and mark not in marks:
                marks[mark] = time.time() - began
    out = process.stdout.read()
    process.wait()
    marks["command exited"] = time.time() - began
    if process.returncode != 0:
        sys.exit(f"bench: {' '.join(argv)} exited {process.returncode}")
    marks.update(log_marks(Path(out.strip().splitlines()[-1]), began))
    return marks


def log_marks(session: Path, began: float) -> dict[str, float]:
    """The capture log's marks, as seconds since `began`."""
    marks: dict[str, float] = {}
    for line in iter_records(session):
        record = line.record
        at = datetime.fromisoformat(record["ts"].replace("Z", "+00:00")).timestamp() - began
        if record["kind"] in ("request", "egress_blocked"):
            marks.setdefault("browser's first request", at)
            if record["kind"] == "request" and urlsplit(record["url"]).hostname.endswith(SITES):
                marks.setdefault("first request to the sites", at)
                marks["last request to the sites"] = at
        elif record["kind"] == "session_end":
            marks["log closed"] = at
    return marks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, metavar="N")
    parser.add_argument("--before", metavar="PYTHON", help="another checkout's interpreter, run alternately")
    args = parser.parse_args()
    chromium = shutil.which("chromium") or sys.exit("bench: chromium not found")
    pythons = {"after": sys.executable} | ({"before": args.before} if args.before else {})
    load_before = load()
    runs: dict[str, list] = {name: [] for name in pythons}
    anchors = []
    with tempfile.TemporaryDirectory(prefix="bench-phases-") as tmp:
        tmp = Path(tmp)
        for name, python in pythons.items():   # the first run builds the CA, key and catalog: not timed
            run(python, tmp / name)
        for _ in range(args.repeat):
            anchors.append(measure([chromium, "--headless", "--no-sandbox", f"--user-data-dir={tmp / 'profile'}",
                                    "--dump-dom", "data:text/html,<p>anchor</p>"], tmp)[0])
            for name, python in reversed(pythons.items()):
                runs[name].append(run(python, tmp / name))
    anchor = statistics.median(anchors)
    print(f"anchor (headless Chromium start, one page, quit): {anchor:.2f} s; "
          f"medians of {args.repeat} runs; load average {load_before} before, {load()} after")
    names = list(reversed(pythons))
    print("| mark (s since the command started) | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    order = sorted(runs["after"][0], key=lambda m: statistics.median(r[m] for r in runs["after"]))
    for mark in order:
        print(f"| {mark} | " + " | ".join(f"{statistics.median(r[mark] for r in runs[n]):.2f}" for n in names) + " |")
    print("| wall × anchor | " + " | ".join(
        f"{statistics.median(r['command exited'] for r in runs[n]) / anchor:.1f}×" for n in names) + " |")


if __name__ == "__main__":
    main()
