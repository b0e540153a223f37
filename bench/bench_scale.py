"""Audit and report at the scale of the paper's matrix, on real sessions, against `sha256sum` of the
same capture logs measured in the same run.

    python bench/bench_scale.py --sessions RUNS/sessions           # 1,080 copies of real sessions
    python bench/bench_scale.py --sessions RUNS/sessions --times 10   # and 10,800: how it grows
    python bench/bench_scale.py                                      # runs the smoke matrix first

The real sessions (default: the 8 of `spillage batch matrices/smoke.yaml`, both frameworks, run
here first) are copied to 1,080 folders (× --times), without their audit.json. Then `spillage audit
DIR --jobs N` and `spillage report DIR` are timed, and the disk a session takes is measured. Goal:
audit and report together in at most 60 s on 2 cores for 1,080 sessions.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from spillage.proxy.layout import LOG_NAME
from spillage.proxy.layout import REPORT_NAME

REPO = Path(__file__).resolve().parent.parent
SPILLAGE = [sys.executable, "-m", "spillage.runner.cli"]
CELLS = 1080


def timed(argv: list[str], **kwargs) -> float:
    began = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, **kwargs)
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv[:6])} … failed: {done.stderr[-2000:]}")
    return time.perf_counter() - began


def smoke_sessions(tmp: Path, home: Path) -> Path:
    """The smoke matrix run here (scripted agents, both frameworks); its sessions folder."""
    runs = tmp / "smoke"
    took = timed([*SPILLAGE, "--home", str(home), "batch", str(REPO / "matrices" / "smoke.yaml"),
                  "--runs-dir", str(runs), "--jobs", "2", "--no-audit"], cwd=tmp)
    print(f"smoke matrix run in {took:.0f} s")
    return runs / "sessions"


def copies(sessions: Path, target: Path, count: int) -> list[Path]:
    """`count` copies of the sessions below `sessions` (round robin), without audit.json."""
    real = sorted(p for p in sessions.iterdir() if (p / LOG_NAME).is_file())
    if not real:
        sys.exit(f"{sessions}: no session folders")
    target.mkdir(parents=True)
    made = []
    for i in range(count):
        source = real[i % len(real)]
        made.append(shutil.copytree(source, target / f"{i:05d}-{source.name}",
                                    ignore=shutil.ignore_patterns(REPORT_NAME)))
    return made


def disk(paths: list[Path]) -> float:
    """Mean disk use of a session folder, MB (blocks, as du counts them)."""
    out = subprocess.run(["du", "-sk", *map(str, paths[:50])], capture_output=True, text=True, check=True).stdout
    sizes = [int(line.split()[0]) for line in out.splitlines()]
    return sum(sizes) / len(sizes) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=Path, help="a folder of real session folders (default: run the smoke matrix)")
    parser.add_argument("--home", type=Path, help="the spillage home the sessions were run with (their catalog store)")
    parser.add_argument("--times", type=int, nargs="+", default=[1], help="multiples of 1,080 sessions (default 1)")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp_name:
        tmp = Path(tmp_name)
        home = args.home or tmp / "home"
        sessions = args.sessions or smoke_sessions(tmp, home)
        print(f"load average {Path('/proc/loadavg').read_text().split()[:3]}; {args.jobs} audit jobs")
        print(f"{'sessions':>9}{'MB logs':>9}{'sha256sum s':>13}{'audit s':>9}{'report s':>10}{'together':>10}"
              f"{'ms/session':>12}{'MB/session':>12}")
        for times in args.times:
            count = CELLS * times
            runs = tmp / f"runs-{count}"
            made = copies(sessions, runs, count)
            logs = [p / LOG_NAME for p in made]
            size = sum(p.stat().st_size for p in logs) / 1e6
            anchor = time.perf_counter()
            with subprocess.Popen(["sha256sum"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL) as hasher:
                for log in logs:
                    hasher.stdin.write(log.read_bytes())
            anchor = time.perf_counter() - anchor
            audit = timed([*SPILLAGE, "--home", str(home), "audit", str(runs), "--jobs", str(args.jobs)])
            report = timed([*SPILLAGE, "report", str(runs), "--out", str(tmp / f"report-{count}"), "--quiet"])
            print(f"{count:>9}{size:>9.0f}{anchor:>13.1f}{audit:>9.1f}{report:>10.1f}{audit + report:>10.1f}"
                  f"{(audit + report) / count * 1000:>12.1f}{disk(made):>12.2f}")
            shutil.rmtree(runs)


if __name__ == "__main__":
    main()
