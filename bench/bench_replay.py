"""Replay throughput against bare mitmdump forwarding the same pages, measured in the same run.

    python bench/bench_replay.py [--requests 400]

A session of N recorded GETs (the four shop.test pages of bench_proxy.py, over HTTPS as a
browser sends them) is written with the real CaptureWriter and replayed with `replay_session`:
a fresh origins + capturing proxy, our client through a TLS tunnel, every request and response
captured again. Only the sending is timed (not starting the stack). The anchor is bare mitmdump
forwarding the same pages over plain HTTP on one keep-alive connection (bench_proxy.py's anchor).
"""

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_proxy import bare_mitmdump_rate  # noqa: E402
from bench_proxy import shop_paths  # noqa: E402

from spillage.origins.catalog import Catalog  # noqa: E402
from spillage.addons.mitm.ca import ensure_ca  # noqa: E402
from spillage.proxy.capturelog import CaptureWriter  # noqa: E402
from spillage.proxy.layout import CATALOG_COPY  # noqa: E402
from spillage.runner.children import Child  # noqa: E402
from spillage.runner.replay import replay_session  # noqa: E402
from spillage.runner.stack import ORIGINS_READY  # noqa: E402
from spillage.runner.stack import origins_command  # noqa: E402


def recorded_session(folder: Path, catalog: Path, paths: list[str], count: int) -> Path:
    """A session whose log holds `count` GETs for shop.test pages, each with a stand-in response."""
    folder.mkdir()
    (folder / CATALOG_COPY).write_bytes(catalog.read_bytes())  # an older session's own copy: replay reads it
    with CaptureWriter(folder) as writer:
        writer.append("session_start", session=folder.name, tool={"name": "bench", "version": "0", "mitmproxy": "0"},
                      options={})
        for i in range(count):
            flow = f"00000000-0000-4000-8000-{i:012d}"
            request = writer.append("request", flow=flow, method="GET", url=f"https://shop.test{paths[i % len(paths)]}",
                                    http_version="HTTP/2.0", headers=[["accept", "text/html"]], body=None)
            writer.append("response", flow=flow, request=request["seq"], status=200, reason="",
                          http_version="HTTP/2.0", headers=[], body=None)
        writer.append("session_end", reason="bench", records=writer.count)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=400)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ca = ensure_ca(tmp / "ca")
        with Child("origins", origins_command(tmp / "sites.sqlite"), ORIGINS_READY, tmp / "sites.log") as origins:
            origin = origins.match.group(1).removeprefix("http://")
            paths = shop_paths(Catalog(tmp / "sites.sqlite"))
            anchor = bare_mitmdump_rate(tmp, ca, origin, paths, args.requests)
        session = recorded_session(tmp / "recorded", tmp / "sites.sqlite", paths, args.requests)
        result = replay_session(session, tmp / "runs", tmp / "ca", log=lambda message: None)
        answered = sum(s.status == 200 for s in result.sent)
        if answered != args.requests:
            sys.exit(f"bench: only {answered} of {args.requests} replayed requests answered 200")
    rate = args.requests / result.seconds
    print(f"bare mitmdump (anchor) {anchor:8.1f} req/s")
    print(f"spillage replay        {rate:8.1f} req/s  {anchor / rate:5.2f}x anchor time per request "
          f"({args.requests} requests re-sent over TLS and captured again)")


if __name__ == "__main__":
    main()
