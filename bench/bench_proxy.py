"""Proxy throughput with our addons against bare mitmdump, measured in the same run.

    python bench/bench_proxy.py [--requests 400]

Both proxies forward to the same origin server on loopback. The anchor is bare mitmdump
asked for http://127.0.0.1:PORT/...; ours is asked for http://shop.test/... (resolved to the
same origin) and writes every request and response into a capture log.
"""

import argparse
import http.client
import sys
import tempfile
import time
from pathlib import Path

from spillage.origins.catalog import Catalog
from spillage.proxy.ca import ensure_ca
from spillage.proxy.launcher import mitmdump_command
from spillage.proxy.launcher import mitmdump_path
from spillage.runner.children import Child
from spillage.runner.stack import ORIGINS_READY
from spillage.runner.stack import PROXY_READY
from spillage.runner.stack import origins_command

BARE_READY = r"proxy listening at ([0-9.]+:[0-9]+)"


def shop_paths(catalog: Catalog) -> list[str]:
    """The four shop.test pages requested in turn: home, a search, a product, a filtered search."""
    kettle = catalog.search("shop.test", "gooseneck kettle").products[0]
    return ["/", "/s?k=gooseneck+kettle", f"/p/{kettle.id}", "/s?k=kettle&f=cordless"]


def requests_per_second(proxy_url: str, host: str, paths: list[str], count: int) -> float:
    """Sequential GETs through the proxy over one keep-alive connection, all for shop.test."""
    address = proxy_url.removeprefix("http://")
    connection = http.client.HTTPConnection(address, timeout=10)
    began = time.perf_counter()
    for i in range(count):
        path = paths[i % len(paths)]
        connection.request("GET", f"http://{host}{path}", headers={"Host": "shop.test"})
        response = connection.getresponse()
        response.read()
        if response.status != 200:
            sys.exit(f"bench: {host}{path} answered {response.status}")
    seconds = time.perf_counter() - began
    connection.close()
    return count / seconds


def bare_mitmdump_rate(tmp: Path, ca, origin: str, paths: list[str], count: int) -> float:
    """The anchor: requests per second through a bare mitmdump (no addons) to `origin`, after a warm-up."""
    argv = [str(mitmdump_path()), "--listen-host", "127.0.0.1", "--listen-port", "0",
            "--set", f"confdir={ca.confdir}", "--set", "flow_detail=0"]
    with Child("bare mitmdump", argv, BARE_READY, tmp / "bare.log") as bare:
        url = "http://" + bare.match.group(1)
        requests_per_second(url, origin, paths, 20)
        return requests_per_second(url, origin, paths, count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=400)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ca = ensure_ca(tmp / "ca")
        with Child("origins", origins_command(tmp / "catalog.sqlite"), ORIGINS_READY,
                   tmp / "origins.log") as origins:
            origin = origins.match.group(1).removeprefix("http://")
            paths = shop_paths(Catalog(tmp / "catalog.sqlite"))
            anchor = bare_mitmdump_rate(tmp, ca, origin, paths, args.requests)
            session = tmp / "session"
            session.mkdir()
            ours_argv = mitmdump_command(ca, origin, session)
            with Child("spillage proxy", ours_argv, PROXY_READY, tmp / "ours.log") as ours:
                requests_per_second(ours.match.group(1), "shop.test", paths, 20)
                rate = requests_per_second(ours.match.group(1), "shop.test", paths, args.requests)
            records = sum(1 for _ in (session / "capture.jsonl").open())
    print(f"bare mitmdump (anchor) {anchor:8.1f} req/s")
    print(f"spillage proxy         {rate:8.1f} req/s  {anchor / rate:5.2f}x anchor time per request "
          f"({records} records captured)")


if __name__ == "__main__":
    main()
