"""Capture log speed against `sha256sum` of the same bytes, measured in the same run.

    python bench/bench_capturelog.py [--records 20000]

Prints one line per measurement and the ratios; docs/BENCHMARKS.md records the results.
"""

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

from spillage.proxy.capturelog import CaptureWriter
from spillage.proxy.capturelog import iter_records
from spillage.proxy.verify import verify

HEADERS = [["Host", "shop.test"], ["User-Agent", "Mozilla/5.0 (X11; Linux x86_64) Chrome/150"],
           ["Accept", "text/html,application/xhtml+xml"], ["Accept-Language", "en-US,en;q=0.9"]]
PAGE = ("<li data-product=\"106\"><a href=\"/p/106\">Fenn Gooseneck Kettle</a></li>\n" * 60).encode()


def timed(fn) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def write_session(session: Path, records: int) -> None:
    with CaptureWriter(session) as writer:
        writer.append("session_start", session=session.name,
                      tool={"name": "bench", "version": "0", "mitmproxy": "-"}, options={})
        for i in range(records // 2):
            request = writer.append("request", flow=f"f{i}", method="GET",
                                    url=f"https://shop.test/s?k=kettle+{i}", http_version="HTTP/2.0",
                                    headers=HEADERS, body=None)
            writer.append("response", flow=f"f{i}", request=request["seq"], status=200, reason="OK",
                          http_version="HTTP/2.0", headers=HEADERS, body=writer.body(PAGE))
        writer.append("session_end", reason="bench", records=writer.count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=20000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        session = Path(tmp) / "session"
        t_write = timed(lambda: write_session(session, args.records))
        log = session / "capture.jsonl"
        size_mb = log.stat().st_size / 1e6
        t_sha = timed(lambda: subprocess.run(["sha256sum", str(log)], check=True, capture_output=True))
        t_read = timed(lambda: sum(1 for _ in iter_records(session)))
        t_verify = timed(lambda: verify(session))
    print(f"log: {args.records} records, {size_mb:.1f} MB")
    for name, seconds in [("sha256sum (anchor)", t_sha), ("write", t_write),
                          ("read", t_read), ("verify", t_verify)]:
        print(f"{name:<20} {seconds:8.3f} s  {size_mb / seconds:8.1f} MB/s  "
              f"{seconds / t_sha:6.1f}x anchor")


if __name__ == "__main__":
    main()
