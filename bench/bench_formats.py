"""Capture-file import and export throughput, beside `tshark -r FILE -q` reading the same pcap.

    python bench/bench_formats.py [--exchanges 4000] [--big-mb 200]
    python bench/bench_formats.py --har-entries 200000 [--sizes 10000 50000]

Builds a session of `--exchanges` request/response pairs (realistic headers, a 4 KB page each),
exports it as HAR, mitmproxy flows and pcap, imports each file back (log only, no catalog), and
prints MB/s per format and the ratio to tshark's time on the pcap (the anchor, same run). Then it
imports a pcap of about `--big-mb` MB (the exported pcap repeated) and a tenth of it in child
processes and prints their peak memory: the bound docs/CAPTURE_FILES.md states.

`--har-entries N` instead imports HARs of small entries (a 280-byte page each; N, and each of
`--sizes`) in child processes, and prints the time, CPU time, entries a second and peak memory of
each: an import's cost should grow with the entries, no faster. The anchor is `json.loads` of the
same file in a child process (reading a HAR is that, at least).
"""

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from spillage.proxy.capturelog import CaptureWriter
from spillage.proxy.formats.exports import export_session
from spillage.proxy.formats.imports import write_import_log

HEADERS = [["Host", "shop.test"], ["User-Agent", "Mozilla/5.0 (X11; Linux x86_64) Chrome/150"],
           ["Accept", "text/html,application/xhtml+xml"], ["Accept-Language", "en-US,en;q=0.9"]]
PAGE = ("<li data-product=\"106\"><a href=\"/p/106\">Fenn Gooseneck Kettle</a></li>\n" * 60).encode()
PCAP_HEADER = 24


def write_session(session: Path, exchanges: int) -> None:
    with CaptureWriter(session) as writer:
        writer.append("session_start", session=session.name,
                      tool={"name": "bench", "version": "0", "mitmproxy": "-"}, options={})
        for i in range(exchanges):
            headers = HEADERS + [["Content-Length", str(len(PAGE))]]
            request = writer.append("request", flow=f"f{i}", method="GET",
                                    url=f"http://shop.test/s?k=kettle+{i}", http_version="HTTP/1.1",
                                    headers=HEADERS, body=None)
            writer.append("response", flow=f"f{i}", request=request["seq"], status=200, reason="OK",
                          http_version="HTTP/1.1", headers=headers, body=writer.body(PAGE))
        writer.append("session_end", reason="bench", records=writer.count)


def timed(fn) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def peak_import_kb(pcap: Path, out: Path) -> tuple[int, float]:
    """Peak resident memory (KiB) of a child process importing `pcap`, and its time."""
    code = ("import sys; from pathlib import Path; from spillage.proxy.formats.imports import write_import_log; "
            "Path(sys.argv[2]).mkdir(); write_import_log(Path(sys.argv[1]), 'pcap', Path(sys.argv[2]))")
    began = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-f", "%M", sys.executable, "-c", code, str(pcap), str(out)],
                          capture_output=True, text=True, check=True)
    return int(done.stderr.strip().splitlines()[-1]), time.perf_counter() - began


def repeated(pcap: Path, target: Path, megabytes: float) -> int:
    """`pcap`'s packets again and again (each connection closes before its 4-tuple comes back)."""
    data = pcap.read_bytes()
    packets = data[PCAP_HEADER:]
    copies = max(1, int(megabytes * 1e6 // len(packets)))
    with open(target, "wb") as f:
        f.write(data[:PCAP_HEADER])
        for _ in range(copies):
            f.write(packets)
    return copies


def child(code: str, *args: str) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and peak resident KiB of `python -c code args`."""
    began = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-f", "%U %S %M", sys.executable, "-c", code, *args],
                          capture_output=True, text=True, check=True)
    user, system, peak = done.stderr.strip().splitlines()[-1].split()
    return time.perf_counter() - began, float(user) + float(system), int(peak)


def har_scaling(sizes: list[int]) -> None:
    global PAGE
    PAGE = b"<p>Fenn Gooseneck Kettle</p>\n" * 10
    importing = ("import sys; from pathlib import Path; from spillage.proxy.formats.imports import write_import_log; "
                 "Path(sys.argv[2]).mkdir(); write_import_log(Path(sys.argv[1]), 'har', Path(sys.argv[2]))")
    loading = "import json, sys; json.loads(open(sys.argv[1], 'rb').read())"
    print("| entries | HAR MB | json.loads s (anchor) | import s | import CPU s | entries/s | x anchor | peak RSS MiB |")
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            session, har = Path(tmp) / f"s{n}", Path(tmp) / f"x{n}.har"
            write_session(session, n)
            export_session(session, "har", har)
            shutil.rmtree(session)
            anchor, _, _ = child(loading, str(har))
            took, cpu, peak = child(importing, str(har), str(Path(tmp) / f"in{n}"))
            shutil.rmtree(Path(tmp) / f"in{n}")
            print(f"| {n} | {har.stat().st_size / 1e6:.0f} | {anchor:.2f} | {took:.1f} | {cpu:.1f} | {n / took:.0f} | "
                  f"{took / anchor:.1f} | {peak / 1024:.0f} |", flush=True)
            har.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--exchanges", type=int, default=4000)
    parser.add_argument("--big-mb", type=float, default=200)
    parser.add_argument("--har-entries", type=int, help="import HARs of this many small entries (and --sizes)")
    parser.add_argument("--sizes", type=int, nargs="*", default=[10000, 50000])
    args = parser.parse_args()
    if args.har_entries:
        har_scaling([*args.sizes, args.har_entries])
        return
    if shutil.which("tshark") is None:
        sys.exit("tshark is needed as the anchor: apt-get install -y tshark")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        session = tmp / "session"
        write_session(session, args.exchanges)
        files = {fmt: tmp / f"x.{fmt}" for fmt in ("har", "mitm", "pcap")}
        exported = {fmt: timed(lambda: export_session(session, fmt, path)) for fmt, path in files.items()}
        imported = {}
        for fmt, path in files.items():
            (tmp / f"in-{fmt}").mkdir()
            imported[fmt] = timed(lambda: write_import_log(path, fmt, tmp / f"in-{fmt}"))
        anchor = timed(lambda: subprocess.run(["tshark", "-r", str(files["pcap"]), "-q"], check=True,
                                              capture_output=True))
        pcap_mb = files["pcap"].stat().st_size / 1e6
        print(f"{args.exchanges} exchanges; pcap {pcap_mb:.1f} MB")
        print(f"tshark -r FILE -q (anchor): {anchor:.3f} s, {pcap_mb / anchor:.1f} MB/s, x1.0")
        print("| format | file MB | export s | export MB/s | import s | import MB/s | import x anchor |")
        for fmt, path in files.items():
            mb = path.stat().st_size / 1e6
            print(f"| {fmt} | {mb:.1f} | {exported[fmt]:.3f} | {mb / exported[fmt]:.1f} | "
                  f"{imported[fmt]:.3f} | {mb / imported[fmt]:.1f} | "
                  f"{(imported[fmt] / mb) / (anchor / pcap_mb):.1f} |")
        big, small = tmp / "big.pcap", tmp / "small.pcap"
        copies = repeated(files["pcap"], big, args.big_mb)
        repeated(files["pcap"], small, args.big_mb / 10)
        print(f"big pcaps: the exported one repeated ({copies} copies in the big one); child processes")
        for path in (small, big):
            mb = path.stat().st_size / 1e6
            kb, took = peak_import_kb(path, tmp / f"mem-{path.stem}")
            shutil.rmtree(tmp / f"mem-{path.stem}")
            anchor = timed(lambda: subprocess.run(["tshark", "-r", str(path), "-q"], check=True,
                                                  capture_output=True))
            print(f"| {mb:.0f} MB pcap | import {took:.1f} s, {mb / took:.1f} MB/s | tshark {anchor:.1f} s, "
                  f"{mb / anchor:.1f} MB/s | x{took / anchor:.1f} | peak RSS {kb / 1024:.0f} MiB |")


if __name__ == "__main__":
    main()
