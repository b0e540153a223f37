"""`spillage report` speed on a batch of 1,080 audited sessions, against reading and parsing the
same audit.json files measured in the same run.

    python bench/bench_report.py                  # 1,080 sessions: 36 groups of 30
    python bench/bench_report.py --sessions 216

The batch is synthetic (tests/report_helpers.py): 2 frameworks × 3 models × 2 sites × 3 styles
× 2 prompts, each session with 30 actions and 0 to 9 events, so its audit.json is about the size
of a real one's. Timed: loading the batch (every audit.json, meta.json and scenario copy), the
whole report (tables with 10,000 bootstrap resamples per group, plots, pages, parquet), and a
comparison of the two prompts. Anchor: `json.loads` of every audit.json, the floor any reader pays.

Prints one table; docs/REPORTS.md records the results.
"""

import argparse
import itertools
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from report_helpers import write_audited_session  # noqa: E402

from spillage.reports.batch_report import ReportOptions  # noqa: E402
from spillage.reports.batch_report import write_batch_report  # noqa: E402
from spillage.reports.sessions import load_batch  # noqa: E402

GRID = {"framework": ["browser-use", "autogen"], "model": ["scripted:a", "scripted:b", "scripted:c"],
        "site": ["shop.test", "bazaar.test"], "style": ["chat", "email", "generic"],
        "prompt": ["original", "sanitized"]}


def make_batch(root: Path, sessions: int) -> None:
    cells = list(itertools.product(*GRID.values()))
    for n in range(sessions):
        cell = dict(zip(GRID, cells[n % len(cells)]))
        write_audited_session(root, f"s{n:05d}", **cell, actions=30,
                              occurrences={"C_E": n % 3, "C_I": n % 2, "B_E": n % 4, "B_I": (n // 7) % 2},
                              success=n % 5 != 0, recovered=[{"first-party"}] * (n % 3))


def timed(action) -> float:
    began = time.perf_counter()
    action()
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1080)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        root, out = Path(tmp) / "runs", Path(tmp) / "out"
        make_batch(root, args.sessions)
        batch = load_batch([root], bar=False)  # and warms the page cache for both timings below
        anchor = timed(lambda: all(json.loads(p.read_text()) for p in sorted(root.glob("*/audit.json"))))
        load = timed(lambda: load_batch([root], bar=False))
        report = timed(lambda: write_batch_report(batch, out))
        compare = timed(lambda: write_batch_report(batch, out, ReportOptions(
            compare=("prompt=original", "prompt=sanitized"))))
    groups = len(list(itertools.product(*list(GRID.values())[:4])))
    print(f"{args.sessions} sessions, {groups} groups (framework, model, site, style)")
    print(f"{'step':<40} {'seconds':>8} {'x anchor':>9}")
    for step, seconds in (("json.loads of each audit.json (anchor)", anchor), ("load the batch", load),
                          ("report (tables, CIs, plots, pages)", report), ("report with --compare prompt", compare)):
        print(f"{step:<40} {seconds:8.2f} {seconds / anchor:9.1f}")


if __name__ == "__main__":
    main()
