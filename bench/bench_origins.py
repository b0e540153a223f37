"""Origin server speed: page latency, requests per second, and the catalog build.

    python bench/bench_origins.py [--requests 300] [--clients 8] [--seconds 10]

Everything runs against one origin server (waitress, 8 threads) on loopback, asked directly with
a Host header. Anchors measured in the same run: the tracker script `metrics.test/t.js` (a
static response through the same server, so the ratio is what our pages add to waitress and
falcon), and for the build, reading the benchmark's scenario YAML with PyYAML.
"""

import argparse
import http.client
import statistics
import tempfile
import threading
import time
from pathlib import Path

import yaml
from urllib.parse import quote_plus as quote

from spillage.origins.catalog import Catalog
from spillage.origins.catalog import build_catalog
from spillage.origins.catalog import load_benchmark
from spillage.runner.children import Child
from spillage.runner.stack import ORIGINS_READY
from spillage.runner.stack import origins_command
from spillage.scenarios.files import BENCHMARK_DIRS
from spillage.scenarios.files import scenario_files


def catalog_paths(catalog: Catalog, scenarios) -> dict[str, list[tuple[str, str]]]:
    """(host, path) request lists per page kind, from the scenarios' own task queries."""
    tasks = {s.persona: s for s in scenarios}.values()
    shop = [s for s in tasks if s.site == "shop.test"]
    bazaar = [s for s in tasks if s.site == "bazaar.test"]
    return {
        "static t.js (anchor)": [("metrics.test", "/t.js")],
        "shop.test search": [("shop.test", f"/s?k={quote(s.task)}") for s in shop],
        "shop.test product": [("shop.test", f"/p/{p.id}") for p in catalog.products("shop.test")[::50]],
        "shop.test home": [("shop.test", "/")],
        "bazaar.test search": [("bazaar.test", f"/sch/?_nkw={quote(s.task)}") for s in bazaar],
        "bazaar.test item": [("bazaar.test", f"/itm/{p.id}") for p in catalog.products("bazaar.test")[::50]],
    }


def fetch(connection: http.client.HTTPConnection, host: str, path: str) -> None:
    connection.request("GET", path, headers={"Host": host})
    response = connection.getresponse()
    response.read()
    if response.status != 200:
        raise SystemExit(f"bench: {host}{path} answered {response.status}")


def latencies(address: str, requests: list[tuple[str, str]], count: int) -> list[float]:
    """Seconds per GET, sequential over one keep-alive connection, cycling through `requests`."""
    connection = http.client.HTTPConnection(address, timeout=30)
    for host, path in requests[:5]:
        fetch(connection, host, path)  # warm up
    times = []
    for i in range(count):
        host, path = requests[i % len(requests)]
        began = time.perf_counter()
        fetch(connection, host, path)
        times.append(time.perf_counter() - began)
    connection.close()
    return times


def throughput(address: str, requests: list[tuple[str, str]], clients: int, seconds: float) -> float:
    """Requests per second served to `clients` concurrent keep-alive clients for `seconds`."""
    done = [0] * clients
    stop = time.perf_counter() + seconds

    def client(n: int) -> None:
        connection = http.client.HTTPConnection(address, timeout=30)
        i = n
        while time.perf_counter() < stop:
            fetch(connection, *requests[i % len(requests)])
            done[n] += 1
            i += clients
        connection.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / (time.perf_counter() - began)


def percentile(values: list[float], p: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(p) - 1]


def build_times(tmp: Path, repeats: int = 3) -> tuple[float, float, int]:
    """Best-of-`repeats` seconds to build the benchmark catalog and to parse its YAML (the anchor)."""
    files = scenario_files(BENCHMARK_DIRS)
    parse, build = [], []
    for _ in range(repeats):
        began = time.perf_counter()
        for f in files:
            yaml.safe_load(f.read_text(encoding="utf-8"))
        parse.append(time.perf_counter() - began)
        began = time.perf_counter()
        data = build_catalog(tmp / "built.sqlite")
        build.append(time.perf_counter() - began)
    return min(build), min(parse), len(data.products)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=300, help="sequential requests per page kind")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients for requests/s")
    parser.add_argument("--seconds", type=float, default=10.0, help="duration of the requests/s run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        build, parse, products = build_times(tmp)
        print(f"catalog build: {build:.2f} s for {products} products "
              f"({build / parse:.1f}x parsing the scenario YAML, {parse:.2f} s)")
        with Child("origins", origins_command(tmp / "sites.sqlite"), ORIGINS_READY,
                   tmp / "sites.log") as origins:
            address = origins.match.group(1).removeprefix("http://")
            kinds = catalog_paths(Catalog(tmp / "sites.sqlite"), load_benchmark())
            anchor = None
            print(f"{'page':24} {'p50 ms':>8} {'p99 ms':>8} {'x anchor p50':>13}")
            for kind, requests in kinds.items():
                times = latencies(address, requests, args.requests)
                p50, p99 = percentile(times, 50) * 1000, percentile(times, 99) * 1000
                anchor = anchor or p50
                print(f"{kind:24} {p50:8.2f} {p99:8.2f} {p50 / anchor:13.1f}")
            static = throughput(address, kinds["static t.js (anchor)"], args.clients, args.seconds / 2)
            mixed = [r for kind, rs in kinds.items() if kind != "static t.js (anchor)" for r in rs]
            rate = throughput(address, mixed, args.clients, args.seconds)
            print(f"requests/s with {args.clients} clients: static t.js (anchor) {static:.0f}, "
                  f"mixed shop pages {rate:.0f} ({static / rate:.1f}x anchor time per request)")


if __name__ == "__main__":
    main()
