"""Capture log speed against `sha256sum` of the same bytes, measured in the same run.

    python bench/bench_capturelog.py [--records 20000]        # write, read, verify, prove: one line each
    python bench/bench_capturelog.py --big-mb 600 [--rounds 3] [--source SESSION] [--keep DIR] [--before SRC]

The first writes the same records unsigned and signed (a Merkle tree head over every line, an
Ed25519-signed checkpoint every 256 records), verifies both (in this process, and with the worker
processes `spillage verify` uses on a long log), and cuts and checks an inclusion proof and a
consistency proof from the signed one. Prints one line per measurement and its ratio to sha256sum.

`--big-mb N` builds a signed capture of at least N MB by replaying a real session's records (the
newest session under runs/, or `--source`; without one, tests/corpus/sessions/s01-kettle-oversharer
with the bodies a real session carries, as bench/bench_audit.py makes them) through the real
CaptureWriter, then runs `sha256sum` (A) and `spillage verify` (B) on it in interleaved rounds
(A B, B A, ...), and prints the medians of wall and CPU time (user and system, verify's workers
included), the ratios B/A by CPU time (what stays stable on a busy machine) and by wall time, the
peak memory of verify (the largest process, and all its processes together, sampled every 20 ms) and
the load average: on a loaded machine only the same-run ratio means anything. `--keep DIR` keeps
(or reuses) the capture there. `--before SRC` also runs, in the same rounds (A B C, C B A, ...), the
`spillage verify` of other code: SRC holds a `spillage/` folder laid out as the installed package
(`spillage/proxy`, `spillage/runner`, ...; e.g. `git archive` of an earlier commit, each top folder
put under `spillage/`), imported ahead of it.
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from spillage.proxy.capturelog import KIND_FIELDS
from spillage.proxy.capturelog import WRITER_KINDS
from spillage.proxy.capturelog import CaptureWriter
from spillage.proxy.capturelog import iter_records
from spillage.proxy.capturelog import read_body
from spillage.proxy.capturelog import utc_timestamp
from spillage.proxy.layout import LOG_NAME
from spillage.proxy.proofs import check_proof
from spillage.proxy.proofs import prove_consistency
from spillage.proxy.proofs import prove_inclusion
from spillage.proxy.signing import SessionKey
from spillage.proxy.verify import verify

ROOT = Path(__file__).resolve().parent.parent
HEADERS = [["Host", "shop.test"], ["User-Agent", "Mozilla/5.0 (X11; Linux x86_64) Chrome/150"],
           ["Accept", "text/html,application/xhtml+xml"], ["Accept-Language", "en-US,en;q=0.9"]]
PAGE = ("<li data-product=\"106\"><a href=\"/p/106\">Fenn Gooseneck Kettle</a></li>\n" * 60).encode()
MB = 1e6


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def timed(fn) -> tuple[float, object]:
    began = time.perf_counter()
    value = fn()
    return time.perf_counter() - began, value


def write_session(session: Path, records: int, signing: SessionKey | None) -> None:
    with CaptureWriter(session, signing=signing) as writer:
        writer.append("session_start", session=session.name,
                      tool={"name": "bench", "version": "0", "mitmproxy": "-"}, options={})
        for i in range(records // 2):
            request = writer.append("request", flow=f"f{i}", method="GET",
                                    url=f"https://shop.test/s?k=kettle+{i}", http_version="HTTP/2.0",
                                    headers=HEADERS, body=None)
            writer.append("response", flow=f"f{i}", request=request["seq"], status=200, reason="OK",
                          http_version="HTTP/2.0", headers=HEADERS, body=writer.body(PAGE))
        writer.append("session_end", reason="bench", records=writer.count)


def small(records: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        plain, signed = Path(tmp) / "plain", Path(tmp) / "signed"
        signing = SessionKey.issue(Ed25519PrivateKey.generate(), signed.name, utc_timestamp())
        began = loadavg()
        t_write, _ = timed(lambda: write_session(plain, records, None))
        t_write_signed, _ = timed(lambda: write_session(signed, records, signing))
        log = signed / LOG_NAME
        size_mb = log.stat().st_size / MB
        t_sha, _ = timed(lambda: subprocess.run(["sha256sum", str(log)], check=True, capture_output=True))
        t_read, _ = timed(lambda: sum(1 for _ in iter_records(signed)))
        t_verify, _ = timed(lambda: verify(plain, jobs=1))
        t_verify_signed, result = timed(lambda: verify(signed, jobs=1))
        t_verify_workers, workers = timed(lambda: verify(signed, jobs=2))
        assert result.ok and result.signed and workers == result, result.summary()
        sizes = sorted(r.record["records"] for r in iter_records(signed) if r.record["kind"] == "checkpoint")
        t_prove, proof = timed(lambda: prove_inclusion(signed, records // 2))
        t_check, verdict = timed(lambda: check_proof(proof))
        t_consistency, consistency = timed(lambda: prove_consistency(signed, sizes[len(sizes) // 2], sizes[-1]))
        assert verdict[0] and check_proof(consistency)[0]
    print(f"log: {records} records, {size_mb:.1f} MB signed ({len(sizes)} checkpoints); load {began} -> {loadavg()}")
    for name, seconds in [("sha256sum (anchor)", t_sha), ("write, unsigned", t_write),
                          ("write, signed", t_write_signed), ("read", t_read), ("verify, unsigned", t_verify),
                          ("verify, signed", t_verify_signed), ("verify, 2 workers", t_verify_workers),
                          ("prove inclusion", t_prove), ("prove consistency", t_consistency)]:
        print(f"{name:<20} {seconds:8.3f} s  {size_mb / seconds:8.1f} MB/s  {seconds / t_sha:6.1f}x anchor time")
    print(f"{'verify-proof':<20} {t_check * 1000:8.3f} ms (no log at hand)")


# --- a long capture ---------------------------------------------------------------------------------


def source_records(source: Path | None) -> tuple[str, list[tuple[dict, bytes | None]]]:
    """A real session's records but the writer's own (signer, checkpoints) and its start and end, each
    with its body's bytes."""
    if source is None:
        runs = sorted((p for p in (ROOT / "runs").glob("*") if (p / LOG_NAME).is_file()),
                      key=lambda p: (p / LOG_NAME).stat().st_mtime)
        source = runs[-1] if runs else None
    if source is None:
        sys.path.insert(0, str(Path(__file__).parent))
        from bench_audit import TEMPLATE, template_records  # realistic bodies for the corpus session

        return f"{TEMPLATE.relative_to(ROOT)} with realistic bodies", template_records()
    out = []
    for line in iter_records(source):
        r = line.record
        if r["kind"] in WRITER_KINDS or r["kind"] in ("session_start", "session_end"):
            continue
        out.append((r, read_body(source, r["body"]) if "body" in r else None))
    return str(source), out


def build(session: Path, target_mb: float, records: list[tuple[dict, bytes | None]]) -> int:
    """A signed capture of at least `target_mb` replaying `records`; its record count."""
    signing = SessionKey.issue(Ed25519PrivateKey.generate(), session.name, utc_timestamp())
    log = session / LOG_NAME
    with CaptureWriter(session, signing=signing, fsync_interval=5) as writer:
        writer.append("session_start", session=session.name,
                      tool={"name": "bench", "version": "0", "mitmproxy": "-"}, options={})
        loop = 0
        while log.stat().st_size < target_mb * MB:
            seqs: dict[int, int] = {}
            for r, body in records:
                fields = {k: r[k] for k in KIND_FIELDS[r["kind"]]}
                if fields.get("flow"):
                    fields["flow"] = f"{fields['flow'][:24]}{loop:012d}"
                if isinstance(fields.get("request"), int):
                    fields["request"] = seqs.get(fields["request"], 0)
                if "body" in fields:
                    fields["body"] = writer.body(body)
                seqs[r["seq"]] = writer.append(r["kind"], **fields)["seq"]
            loop += 1
        writer.append("session_end", reason="bench", records=writer.count)
        return writer.count


def tree_rss_mb(pid: int) -> float:
    """Resident memory of process `pid` and all its descendants, in MB (Linux)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            rss[int(entry.name)] = int(stat[21]) * os.sysconf("SC_PAGE_SIZE")
            children.setdefault(int(stat[1]), []).append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo += children.get(p, [])
    return total / MB


def children_cpu() -> float:
    """CPU seconds (user and system) of this process's children that have ended, theirs included."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run_sha256sum(log: Path) -> tuple[float, float]:
    """`sha256sum LOG`: seconds and CPU seconds."""
    began, cpu = time.perf_counter(), children_cpu()
    subprocess.run(["sha256sum", str(log)], check=True, capture_output=True)
    return time.perf_counter() - began, children_cpu() - cpu


def run_verify(session: Path, before: Path | None = None) -> tuple[float, float, float, str]:
    """`spillage verify SESSION` as a user runs it (with the code under `before` ahead of the installed
    package, if given): seconds, CPU seconds (its workers' included), peak MB of all its processes
    together, and what it printed."""
    spillage = Path(sys.executable).parent / "spillage"
    env = None
    if before is not None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(before), os.environ.get("PYTHONPATH", "")])}
    began, cpu = time.perf_counter(), children_cpu()
    proc = subprocess.Popen([str(spillage), "verify", str(session)], stdout=subprocess.PIPE, text=True, env=env)
    peak = 0.0

    def sample() -> None:
        nonlocal peak
        while proc.poll() is None:
            peak = max(peak, tree_rss_mb(proc.pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    out, _ = proc.communicate()
    seconds, cpu = time.perf_counter() - began, children_cpu() - cpu
    sampler.join()
    if proc.returncode != 0:
        sys.exit(f"bench: spillage verify failed:\n{out}")
    return seconds, cpu, peak, out.strip()


def big(target_mb: float, rounds: int, source: Path | None, keep: Path | None, before: Path | None = None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        session = keep or Path(tmp) / "big"
        if not (session / LOG_NAME).is_file():
            named, records = source_records(source)
            session.mkdir(parents=True, exist_ok=True)
            print(f"building a signed capture of {target_mb:.0f} MB from {named} ...", flush=True)
            build_s, _ = timed(lambda: build(session, target_mb, records))
            print(f"  written in {build_s:.1f} s", flush=True)
        log = session / LOG_NAME
        size_mb = log.stat().st_size / MB
        started = loadavg()
        order = "ABC" if before is not None else "AB"
        wall: dict[str, list[float]] = {w: [] for w in order}
        cpus: dict[str, list[float]] = {w: [] for w in order}
        peaks: dict[str, list[float]] = {w: [] for w in order}
        printed: dict[str, str] = {}
        for n in range(rounds):
            for which in (order if n % 2 == 0 else order[::-1]):
                if which == "A":
                    seconds, cpu = run_sha256sum(log)
                else:
                    seconds, cpu, peak, printed[which] = run_verify(session, before if which == "C" else None)
                    peaks[which].append(peak)
                wall[which].append(seconds)
                cpus[which].append(cpu)
        largest = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if before is not None and printed["B"] != printed["C"]:
        sys.exit(f"bench: the two verify printed different verdicts:\n{printed['B']}\n{printed['C']}")
    names = {"A": "A sha256sum", "B": "B spillage verify", "C": f"C verify, {before}"}
    print(f"verify, {size_mb:.1f} MB signed capture ({printed['B'].split(',')[0]}); {rounds} rounds; "
          f"load {started} -> {loadavg()}")
    for which in order:
        w, c = wall[which], cpus[which]
        print(f"  {names[which]:<18} {statistics.median(w):7.2f} s {size_mb / statistics.median(w):7.1f} MB/s, "
              f"CPU {statistics.median(c):6.2f} s  (rounds: {', '.join(f'{s:.2f}' for s in w)}; "
              f"CPU {', '.join(f'{s:.2f}' for s in c)})")
    for which in order[1:]:
        a, b = statistics.median(wall["A"]), statistics.median(wall[which])
        print(f"  ratio {which}/A by CPU time {statistics.median(cpus['A']) / statistics.median(cpus[which]):.2f} "
              f"(median of rounds {statistics.median(x / y for x, y in zip(cpus['A'], cpus[which])):.2f}); "
              f"by wall time {a / b:.2f} (median of rounds "
              f"{statistics.median(x / y for x, y in zip(wall['A'], wall[which])):.2f}); "
              f"peak memory {max(peaks[which]):.0f} MB, all its processes together")
    print(f"  the largest one process of the run: {largest:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--big-mb", type=float, help="build a signed capture of at least this size and "
                        "measure spillage verify on it against sha256sum")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--source", type=Path, help="the session whose records the big capture replays")
    parser.add_argument("--keep", type=Path, help="build the big capture here (or reuse it)")
    parser.add_argument("--before", type=Path, help="with --big-mb: also run the spillage verify of the "
                        "code in this folder (a spillage/ package tree), in the same rounds")
    args = parser.parse_args()
    if args.big_mb:
        big(args.big_mb, args.rounds, args.source, args.keep, args.before)
    else:
        small(args.records)


if __name__ == "__main__":
    main()
