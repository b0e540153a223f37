"""Audit speed and memory on captures of growing size, and a batch of 1,080 sessions, against
`sha256sum` of the same bytes measured in the same run.

    python bench/bench_audit.py                 # 10 MB and 100 MB captures, and the batch
    python bench/bench_audit.py --big           # also a 1 GB capture
    python bench/bench_audit.py --sizes 5 --batch 0 --jobs 2

A synthetic capture is a realistic session replayed until it reaches the size: the records of
tests/corpus/sessions/s01-kettle-oversharer (page loads, beacons, typing, forms, JSON) with the
bodies a real session carries (HTML pages of 15 to 73 KB, the home page as a blob, the real
t.js and site.js), chained and hashed by the real CaptureWriter. Each audit runs in a fresh
process: its peak RSS is measured from just before `audit_session` (the default catalog is
built first), so what grows with the capture shows. The batch copies one loop of that session
1,080 times and audits them with `spillage audit DIR --jobs N`.

Prints one table; docs/BENCHMARKS.md records the results.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from spillage.proxy.layout import BLOB_DIR
from spillage.proxy.layout import LOG_NAME
from spillage.proxy.layout import REPORT_NAME
from spillage.proxy.layout import SCENARIO_COPY
from spillage.proxy.capturelog import KIND_FIELDS
from spillage.proxy.capturelog import CaptureWriter
from spillage.proxy.capturelog import iter_records
from spillage.proxy.capturelog import read_body

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "tests" / "corpus" / "sessions" / "s01-kettle-oversharer"
STATIC = ROOT / "origins" / "static"
MB = 1_000_000
BATCH = 1080


# --- synthetic captures ------------------------------------------------------------------------


def page(kind: str, size: int) -> bytes:
    """An HTML page of about `size` bytes: product tiles with ids, titles and prices."""
    head = f"<!doctype html><html><head><title>Copperleaf: {kind}</title></head><body><ol data-results>\n"
    tiles, i = [], 0
    total = len(head)
    while total < size:
        tile = (f'<li data-product="{10000 + i % 700}"><a href="/p/{10000 + i % 700}"><img alt="" src="/img/'
                f'{i}.png"><span class="title">Brand {i % 37} electric kettle model {i}</span></a>'
                f'<span class="price">${20 + i % 180}.{i % 100:02d}</span></li>\n')
        tiles.append(tile)
        total += len(tile)
        i += 1
    return (head + "".join(tiles) + "</ol></body></html>\n").encode()


def realistic_body(url: str, method: str, status: int) -> bytes | None:
    """The body a real session's response to `url` carries (sizes from a captured browser-use run)."""
    if method != "GET" or status != 200:
        return None
    path = url.split("://", 1)[1].split("/", 1)[1] if "/" in url.split("://", 1)[1] else ""
    if path.startswith("_static/site.js"):
        return (STATIC / "site.js").read_bytes()
    if url.startswith("https://metrics.test/t.js"):
        return (STATIC / "t.js").read_bytes()
    if path.startswith(("suggest", "autosug", "api/")):
        return None
    if path == "":
        return page("home", 73_000)          # over the inline limit: a blob, as in real runs
    if path.startswith(("s?", "sch/")):
        return page("search", 46_000 if "&f=" not in url else 21_000)
    if path.startswith(("p/", "itm/")):
        return page("product", 20_000)
    return page("page", 15_000)


def template_records() -> list[tuple[dict, bytes | None]]:
    """The template session's records (without session_start/end), each with the body to write."""
    urls: dict[int, tuple[str, str]] = {}
    out = []
    for line in iter_records(TEMPLATE):
        r = line.record
        if r["kind"] in ("session_start", "session_end"):
            continue
        body = None
        if r["kind"] in ("request", "egress_blocked"):
            urls[r["seq"]] = (r["url"], r["method"])
            body = read_body(TEMPLATE, r.get("body"))
        elif r["kind"] == "response":
            url, method = urls[r["request"]]
            body = realistic_body(url, method, r["status"]) or read_body(TEMPLATE, r.get("body"))
        out.append((r, body))
    return out


def write_capture(session: Path, target_bytes: int, records=None) -> dict:
    """Replay the template into `session` until capture.jsonl and blobs/ hold `target_bytes`
    (at least one loop); the capture's size, records and loops."""
    records = records or template_records()
    session.mkdir(parents=True)
    shutil.copy(TEMPLATE / SCENARIO_COPY, session / SCENARIO_COPY)
    loops = 0
    with CaptureWriter(session, fsync_interval=5) as writer:
        writer.append("session_start", session=session.name, tool={"name": "bench", "version": "0", "mitmproxy": "-"},
                      options={"inline_limit": writer.inline_limit})
        size = 0
        while loops == 0 or size < target_bytes:
            seqs: dict[int, int] = {}
            for r, body in records:
                fields = {k: r[k] for k in KIND_FIELDS[r["kind"]]}
                if "flow" in fields and fields["flow"]:
                    fields["flow"] = f"{fields['flow'][:24]}{loops:012d}"
                if fields.get("request") is not None:
                    fields["request"] = seqs[fields["request"]]
                if "body" in fields:
                    fields["body"] = writer.body(body)
                seqs[r["seq"]] = writer.append(r["kind"], **fields)["seq"]
            loops += 1
            size = capture_bytes(session)
        writer.append("session_end", reason="bench", records=writer.count)
    return {"bytes": capture_bytes(session), "records": writer.count, "loops": loops}


def capture_bytes(session: Path) -> int:
    blobs = session / BLOB_DIR
    return (session / LOG_NAME).stat().st_size + sum(
        f.stat().st_size for f in blobs.iterdir()) if blobs.exists() else (session / LOG_NAME).stat().st_size


# --- measuring -------------------------------------------------------------------------------


def rss_mb(field: str) -> float:
    """VmRSS or VmHWM of this process in MB (Linux), else ru_maxrss."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024 / MB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / MB


def worker(session: Path) -> None:
    """Audit one session in this fresh process; print seconds, actions and memory as JSON."""
    from spillage.audit.session_audit import audit_session
    from spillage.origins.knowledge import site_profiles

    site_profiles()  # the default catalog, built once per process: not part of the audit's cost
    base = rss_mb("VmRSS")
    try:
        Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM) to the current RSS
        reset = True
    except OSError:
        reset = False
    began = time.perf_counter()
    report = audit_session(session)
    seconds = time.perf_counter() - began
    print(json.dumps({"seconds": seconds, "actions": len(report["actions"]), "events": len(report["events"]),
                      "records": report["capture"]["records"], "base_mb": base,
                      "peak_mb": rss_mb("VmHWM"), "peak_reset": reset}))


def audit_in_subprocess(session: Path, timeout: float) -> dict:
    try:
        run = subprocess.run([sys.executable, __file__, "--worker", str(session)], capture_output=True, text=True,
                             timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"timeout": timeout}
    if run.returncode != 0:
        sys.exit(f"bench: auditing {session} failed:\n{run.stderr[-2000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def timed(argv: list[str], **kw) -> float:
    began = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, **kw)
    return time.perf_counter() - began


def bench_sizes(tmp: Path, sizes_mb: list[int], timeout: float) -> list[dict]:
    records = template_records()
    rows = []
    for size in sizes_mb:
        session = tmp / f"capture-{size}mb"
        began = time.perf_counter()
        made = write_capture(session, size * MB, records)
        write_s = time.perf_counter() - began
        log = session / LOG_NAME
        t_sha = timed(["sha256sum", str(log)])
        result = audit_in_subprocess(session, timeout)
        rows.append({"size_mb": made["bytes"] / MB, "records": made["records"], "loops": made["loops"],
                     "write_s": write_s, "sha_s": t_sha, **result})
        shutil.rmtree(session)
    return rows


def bench_batch(tmp: Path, count: int, jobs: int, timeout: float) -> dict:
    """`count` copies of one loop of the template session, audited with the batch command."""
    one = tmp / "one"
    made = write_capture(one, 0)
    root = tmp / "batch"
    root.mkdir()
    for i in range(count):
        target = root / f"session-{i:04d}"
        target.mkdir()
        for f in (LOG_NAME, SCENARIO_COPY):
            os.link(one / f, target / f)  # read-only inputs; each session gets its own audit.json
        if (one / BLOB_DIR).exists():
            shutil.copytree(one / BLOB_DIR, target / BLOB_DIR, copy_function=os.link)
    logs = sorted(str(p) for p in root.glob("*/capture.jsonl"))
    t_sha = timed(["xargs", "-0", "sha256sum"], input=b"\0".join(map(str.encode, logs)))
    spillage = Path(sys.executable).with_name("spillage")
    help_text = subprocess.run([str(spillage), "audit", "--help"], capture_output=True, text=True).stdout
    if "--jobs" in help_text:
        how = f"spillage audit DIR --jobs {jobs} --judge lexical"
        began = time.perf_counter()
        run = subprocess.run([str(spillage), "audit", str(root), "--jobs", str(jobs), "--judge", "lexical"],
                             capture_output=True, text=True, timeout=timeout)
        seconds = time.perf_counter() - began
        if run.returncode != 0:
            sys.exit(f"bench: batch audit failed:\n{run.stderr[-2000:]}")
    else:  # no batch command yet: the same work in a process pool
        how = f"multiprocessing pool of {jobs} calling audit_session"
        from multiprocessing import Pool

        began = time.perf_counter()
        with Pool(jobs) as pool:
            pool.map(_audit_and_write, [str(root / f"session-{i:04d}") for i in range(count)])
        seconds = time.perf_counter() - began
    written = sum(1 for _ in root.glob("*/audit.json"))
    if written != count:
        sys.exit(f"bench: batch wrote {written} audit.json files for {count} sessions")
    return {"sessions": count, "jobs": jobs, "how": how, "seconds": seconds, "sha_s": t_sha,
            "session_mb": made["bytes"] / MB, "records": made["records"]}


def _audit_and_write(session: str) -> None:
    from spillage.audit.session_audit import audit_session

    report = audit_session(Path(session))
    (Path(session) / REPORT_NAME).write_text(json.dumps(report))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="*", default=[10, 100], help="capture sizes in MB (default 10 100)")
    parser.add_argument("--big", action="store_true", help="also a 1 GB capture (about 1 GB of disk, minutes)")
    parser.add_argument("--batch", type=int, default=BATCH, help=f"sessions in the batch (default {BATCH}; 0: none)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes for the batch")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds one audit may take")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker)
        return
    sizes = args.sizes + ([1000] if args.big else [])
    with tempfile.TemporaryDirectory(prefix="spillage-bench-") as tmp:
        rows = bench_sizes(Path(tmp), sizes, args.timeout)
        batch = bench_batch(Path(tmp), args.batch, args.jobs, args.timeout) if args.batch else None
    print(f"template: {TEMPLATE.relative_to(ROOT)} with real-size bodies, replayed")
    print(f"{'capture':>9} {'records':>9} {'actions':>8} {'audit s':>8} {'actions/s':>10} {'MB/s':>7} "
          f"{'sha256sum MB/s':>15} {'x anchor':>9} {'RSS base':>9} {'RSS peak':>9} {'growth':>7}")
    for r in rows:
        if "timeout" in r:
            print(f"{r['size_mb']:>7.0f}MB {r['records']:>9} {'timed out after ' + str(int(r['timeout'])) + ' s':>40}")
            continue
        growth = r["peak_mb"] - r["base_mb"]
        print(f"{r['size_mb']:>7.0f}MB {r['records']:>9} {r['actions']:>8} {r['seconds']:>8.2f} "
              f"{r['actions'] / r['seconds']:>10.0f} {r['size_mb'] / r['seconds']:>7.1f} {r['size_mb'] / r['sha_s']:>15.0f} "
              f"{r['seconds'] / r['sha_s']:>9.1f} {r['base_mb']:>7.0f}MB {r['peak_mb']:>7.0f}MB {growth:>5.0f}MB")
    if batch:
        per = batch["seconds"] / batch["sessions"]
        print(f"batch: {batch['sessions']} sessions of {batch['session_mb']:.2f} MB ({batch['records']} records) "
              f"with {batch['how']}: {batch['seconds']:.1f} s ({per * 1000:.0f} ms a session, "
              f"{batch['sessions'] * batch['session_mb'] / batch['seconds']:.1f} MB/s); "
              f"sha256sum of the same logs {batch['sha_s']:.2f} s ({batch['seconds'] / batch['sha_s']:.0f}x)")


if __name__ == "__main__":
    main()
