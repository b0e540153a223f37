"""Proxy throughput with our addons against mitmdump with a routing addon alone, measured in the same run.

    python bench/bench_proxy.py                          # every load shape, 7 interleaved rounds each
    python bench/bench_proxy.py --shape ab-tjs           # one shape: ab-tjs, ab-search, keepalive, https8
    python bench/bench_proxy.py --shape ab-search --rounds 5 --scale 0.5
    python bench/bench_proxy.py --shape keepalive --unsigned --py-spy /tmp/keepalive

All proxies forward to the same origin server on loopback and are asked for the same *.test URLs.
The anchor (A) is mitmdump with the routing addon alone (addons/resolver.py, loaded through this
file); ours (B) is the proxy `spillage run` starts (egress policy, capture, routing, connection guard)
writing every request and response into a signed capture log (a Merkle tree head, an Ed25519-signed
checkpoint every 256 records or 1 s); `--unsigned` turns checkpoints off. Ours also runs less of
mitmproxy than mitmdump does (addons/lean.py) and freezes its startup heap (addons/heap.py), so a
third proxy (C) is the anchor with those two alone: B/A is the goal's ratio, B/C what our request
addons (capture above all) cost over the same mitmproxy. All three are started once per shape and
warmed up, then measured in interleaved rounds (A C B, B C A, ...). Each line gives the median
requests/s and proxy CPU per request of each (user + system time of the mitmdump process), the
ratios (of the medians, and for B/A the median of the per-round ratios), and the load average when
the shape started: on a loaded machine only the same-run ratio means anything.

Load shapes:
  ab-tjs     ab -c 8 (a new connection per request) for the tracker script metrics.test/t.js
  ab-search  ab -c 8 for a shop.test search page (a 40 KB page the origin takes ~4 ms to render)
  keepalive  one keep-alive connection, sequential GETs of four shop.test pages (home, a search, a
             product, a filtered search)
  https8     8 threads, each its own keep-alive TLS tunnel (CONNECT shop.test:443, our CA),
             GETs of the same four pages

`--py-spy PREFIX` records the proxies with py-spy during the rounds into PREFIX-anchor.txt,
PREFIX-lean.txt and PREFIX-ours.txt (collapsed stacks; needs `pip install py-spy`).
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import NamedTuple

BARE_READY = r"proxy listening at ([0-9.]+:[0-9]+)"
SHAPES = ("ab-tjs", "ab-search", "keepalive", "https8")
REQUESTS = {"ab-tjs": 3000, "ab-search": 600, "keepalive": 600, "https8": 800}
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
LEAN = "SPILLAGE_BENCH_LEAN"   # set for proxy C: the anchor with our proxy's lean mitmproxy


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


class Run(NamedTuple):
    rate: float    # requests per second
    cpu: float     # proxy CPU seconds per request


# --- clients ---------------------------------------------------------------------------------------


def ab(proxy: str, url: str, count: int) -> float:
    """`ab -c 8 -n count` through `proxy` (host:port); requests per second. Any failed or non-2xx
    request stops the bench."""
    out = subprocess.run(["ab", "-q", "-c", "8", "-n", str(count), "-X", proxy, url],
                         capture_output=True, text=True, check=True).stdout
    failed = int(re.search(r"Failed requests:\s+(\d+)", out).group(1))
    non2xx = re.search(r"Non-2xx responses:\s+(\d+)", out)
    if failed or non2xx:
        sys.exit(f"bench: ab through {proxy} for {url}: {failed} failed, "
                 f"{non2xx.group(1) if non2xx else 0} non-2xx\n{out}")
    return float(re.search(r"Requests per second:\s+([0-9.]+)", out).group(1))


def keepalive(proxy: str, paths: list[str], count: int) -> float:
    """Sequential GETs through the proxy over one keep-alive connection; requests per second."""
    connection = http.client.HTTPConnection(proxy, timeout=30)
    began = time.perf_counter()
    for i in range(count):
        path = paths[i % len(paths)]
        connection.request("GET", f"http://shop.test{path}", headers={"Host": "shop.test"})
        response = connection.getresponse()
        response.read()
        if response.status != 200:
            sys.exit(f"bench: shop.test{path} answered {response.status}")
    seconds = time.perf_counter() - began
    connection.close()
    return count / seconds


def https_threads(proxy: str, paths: list[str], count: int, tls: ssl.SSLContext, threads: int = 8) -> float:
    """`threads` clients, each over its own keep-alive TLS tunnel to shop.test, `count` GETs in all;
    requests per second."""
    host, port = proxy.rsplit(":", 1)
    connections = []
    for _ in range(threads):  # tunnels and TLS set up before the clock starts
        connection = http.client.HTTPSConnection(host, int(port), context=tls, timeout=30)
        connection.set_tunnel("shop.test", 443)
        connection.connect()
        connections.append(connection)
    errors: list[str] = []

    def client(connection: http.client.HTTPSConnection, n: int) -> None:
        try:
            for i in range(n):
                connection.request("GET", paths[i % len(paths)])
                response = connection.getresponse()
                response.read()
                if response.status != 200:
                    errors.append(f"{paths[i % len(paths)]} answered {response.status}")
                    return
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))

    workers = [threading.Thread(target=client, args=(c, count // threads)) for c in connections]
    began = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    seconds = time.perf_counter() - began
    for c in connections:
        c.close()
    if errors:
        sys.exit(f"bench: https through {proxy}: {errors[0]}")
    return threads * (count // threads) / seconds


# --- proxies ---------------------------------------------------------------------------------------


def anchor_command(ca, origin: str) -> list[str]:
    """mitmdump with the routing addon alone, as our proxy runs it (lazy server connections; run it with
    mitmdump_env(ca), as ours, for our CA)."""
    from spillage.addons.mitm.launcher import mitmdump_path

    return [str(mitmdump_path()), "--listen-host", "127.0.0.1", "--listen-port", "0",
            "--set", "connection_strategy=lazy", "--set", "flow_detail=0",
            "-s", str(Path(__file__).resolve()), "--set", f"spillage_origin={origin}"]


def measure(shape: str, proxy: str, pid: int, paths: list[str], count: int, tls: ssl.SSLContext) -> Run:
    before = cpu_seconds(pid)
    if shape == "ab-tjs":
        rate = ab(proxy, "http://metrics.test/t.js", count)
    elif shape == "ab-search":
        rate = ab(proxy, f"http://shop.test{paths[1]}", count)
    elif shape == "keepalive":
        rate = keepalive(proxy, paths, count)
    else:
        rate = https_threads(proxy, paths, count, tls)
    return Run(rate, (cpu_seconds(pid) - before) / count)


def run_shape(shape: str, tmp: Path, ca, origin: str, paths: list[str], rounds: int, count: int,
              signed: bool, py_spy: Path | None) -> tuple[str, dict[str, list[Run]], int]:
    """The three proxies started, warmed up, then measured in interleaved rounds (A C B, B C A, ...); the
    load average at the start, each one's runs, and the records our log holds."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from spillage.proxy.capturelog import utc_timestamp
    from spillage.proxy.layout import LOG_NAME
    from spillage.addons.mitm.launcher import mitmdump_command
    from spillage.addons.mitm.launcher import mitmdump_env
    from spillage.proxy.signing import SessionKey
    from spillage.runner.children import Child
    from spillage.runner.stack import PROXY_READY
    from spillage.runner.stack import key_pipe

    tls = ssl.create_default_context(cafile=str(ca.cert_file))
    session = tmp / f"{shape}-session"
    session.mkdir()
    fd = key_pipe(SessionKey.issue(Ed25519PrivateKey.generate(), session.name, utc_timestamp())) if signed else None
    argv = mitmdump_command(ca, origin, session, signer_fd=fd)
    env = mitmdump_env(ca)
    with Child("anchor", anchor_command(ca, origin), BARE_READY, tmp / f"{shape}-anchor.log", env=env) as a, \
            Child("lean", anchor_command(ca, origin), BARE_READY, tmp / f"{shape}-lean.log",
                  env={**env, LEAN: "1"}) as c, \
            Child("ours", argv, PROXY_READY, tmp / f"{shape}-ours.log", env=env, pass_fds=(fd,) if signed else ()) as b:
        if fd is not None:
            os.close(fd)
        proxies = {"A": (a.match.group(1), a.supervisor.pid), "C": (c.match.group(1), c.supervisor.pid),
                   "B": (b.match.group(1).removeprefix("http://"), b.supervisor.pid)}
        started = loadavg()
        for name in proxies:  # warm-up: connections, certificates, caches
            measure(shape, *proxies[name], paths, max(50, count // 10), tls)
        spies = []
        for name, label in (("A", "anchor"), ("C", "lean"), ("B", "ours")) if py_spy is not None else ():
            spies.append(subprocess.Popen(
                [shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy"), "record", "--format", "raw",
                 "-o", f"{py_spy}-{label}.txt", "--pid", str(proxies[name][1]), "--rate", "250", "--nonblocking"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1 if spies else 0)
        runs: dict[str, list[Run]] = {name: [] for name in proxies}
        for n in range(rounds):
            for name in ("ACB" if n % 2 == 0 else "BCA"):
                runs[name].append(measure(shape, *proxies[name], paths, count, tls))
        for spy in spies:
            spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
            spy.wait()
    records = sum(1 for _ in (session / LOG_NAME).open("rb"))
    return started, runs, records


def report(shape: str, started: str, runs: dict[str, list[Run]], records: int, signed: bool) -> str:
    rate = {name: statistics.median(r.rate for r in done) for name, done in runs.items()}
    cpu = {name: statistics.median(r.cpu for r in done) for name, done in runs.items()}
    per_round = statistics.median(b.rate / a.rate for a, b in zip(runs["A"], runs["B"]))
    label = "signed" if signed else "checkpoints off"
    rounds = {name: ", ".join(f"{r.rate:.0f}" for r in done) for name, done in runs.items()}
    return (f"{shape:<10} load {started} -> {loadavg()}\n"
            f"  A mitmdump + routing        {rate['A']:7.1f} req/s  cpu {cpu['A'] * 1000:6.3f} ms/req  (rounds: {rounds['A']})\n"
            f"  C A, lean chain, frozen heap {rate['C']:6.1f} req/s  cpu {cpu['C'] * 1000:6.3f} ms/req  (rounds: {rounds['C']})\n"
            f"  B spillage, {label:<15} {rate['B']:7.1f} req/s  cpu {cpu['B'] * 1000:6.3f} ms/req  "
            f"(rounds: {rounds['B']}; {records} records)\n"
            f"  ratio B/A: throughput {rate['B'] / rate['A']:.2f} (median of rounds {per_round:.2f}), "
            f"cpu per request {cpu['B'] / cpu['A']:.2f}x\n"
            f"  what our addons cost, B/C: throughput {rate['B'] / rate['C']:.2f}, cpu per request "
            f"{cpu['B'] / cpu['C']:.2f}x ({(cpu['B'] - cpu['C']) * 1e6:.0f} us a request)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=(*SHAPES, "all"), default="all")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply each shape's request count")
    parser.add_argument("--unsigned", action="store_true", help="our proxy with checkpoints off")
    parser.add_argument("--py-spy", type=Path, metavar="PREFIX", help="record both proxies with py-spy into PREFIX-anchor.txt, PREFIX-ours.txt")
    args = parser.parse_args()
    if shutil.which("ab") is None and args.shape in ("all", "ab-tjs", "ab-search"):
        sys.exit("bench: ab is missing: apt-get install apache2-utils")

    from spillage.origins.catalog import Catalog
    from spillage.addons.mitm.ca import ensure_ca
    from spillage.runner.children import Child
    from spillage.runner.stack import ORIGINS_READY
    from spillage.runner.stack import origins_command

    shapes = SHAPES if args.shape == "all" else (args.shape,)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ca = ensure_ca(tmp / "ca")
        with Child("origins", origins_command(tmp / "sites.sqlite"), ORIGINS_READY, tmp / "sites.log") as origins:
            origin = origins.match.group(1).removeprefix("http://")
            kettle = Catalog(tmp / "sites.sqlite").search("shop.test", "gooseneck kettle").products[0]
            paths = ["/", "/s?k=gooseneck+kettle", f"/p/{kettle.id}", "/s?k=kettle&f=cordless"]
            for shape in shapes:
                count = max(80, int(REQUESTS[shape] * args.scale))
                result = run_shape(shape, tmp, ca, origin, paths, args.rounds, count, not args.unsigned,
                                   args.py_spy)
                print(report(shape, *result, signed=not args.unsigned), flush=True)


if __name__ == "__main__":
    main()
else:  # loaded by mitmdump (`-s bench/bench_proxy.py`) for the anchor: routing alone, and for C with what
    # our proxy does to mitmproxy itself (the built-ins it never uses out of the chain, the startup heap frozen)
    from spillage.addons.resolver import LoopbackResolver

    addons = [LoopbackResolver()]
    if os.environ.get(LEAN):
        from spillage.addons.heap import FrozenStartupHeap
        from spillage.addons.lean import LeanChain

        addons += [LeanChain(), FrozenStartupHeap()]
