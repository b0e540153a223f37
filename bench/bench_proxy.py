"""Proxy throughput with our addons against bare mitmdump, measured in the same run.

    python bench/bench_proxy.py [--requests 400] [--rounds 3]

All proxies forward to the same origin server on loopback. The anchor is bare mitmdump
asked for http://127.0.0.1:PORT/...; ours is asked for http://shop.test/... (resolved to the
same origin) and writes every request and response into a capture log, unsigned (checkpoints
off) and signed (a Merkle tree head and an Ed25519-signed checkpoint every 256 records or 1 s),
in alternating rounds; the best round of each is reported.
"""

import argparse
import http.client
import os
import sys
import tempfile
import time
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from spillage.origins.catalog import Catalog
from spillage.proxy.capturelog import utc_timestamp
from spillage.proxy.layout import LOG_NAME
from spillage.proxy.signing import SessionKey
from spillage.proxy.mitm.ca import ensure_ca
from spillage.proxy.mitm.launcher import mitmdump_command
from spillage.proxy.mitm.launcher import mitmdump_path
from spillage.runner.children import Child
from spillage.runner.stack import ORIGINS_READY
from spillage.runner.stack import PROXY_READY
from spillage.runner.stack import key_pipe
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


def spillage_rate(tmp: Path, ca, origin: str, paths: list[str], count: int, signed: bool,
                  name: str) -> tuple[float, int]:
    """Requests per second through our proxy capturing into a new session, signed or not, after a
    warm-up; and the records it wrote."""
    session = tmp / name
    session.mkdir()
    fd = key_pipe(SessionKey.issue(Ed25519PrivateKey.generate(), name, utc_timestamp())) if signed else None
    argv = mitmdump_command(ca, origin, session, signer_fd=fd)
    try:
        with Child("spillage proxy", argv, PROXY_READY, tmp / f"{name}.log", pass_fds=(fd,) if signed else ()) as ours:
            requests_per_second(ours.match.group(1), "shop.test", paths, 20)
            rate = requests_per_second(ours.match.group(1), "shop.test", paths, count)
    finally:
        if fd is not None:
            os.close(fd)
    return rate, sum(1 for _ in (session / LOG_NAME).open())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ca = ensure_ca(tmp / "ca")
        with Child("origins", origins_command(tmp / "sites.sqlite"), ORIGINS_READY,
                   tmp / "sites.log") as origins:
            origin = origins.match.group(1).removeprefix("http://")
            paths = shop_paths(Catalog(tmp / "sites.sqlite"))
            anchor, unsigned, signed = [], [], []
            for n in range(args.rounds):
                anchor.append(bare_mitmdump_rate(tmp, ca, origin, paths, args.requests))
                unsigned.append(spillage_rate(tmp, ca, origin, paths, args.requests, False, f"unsigned{n}"))
                signed.append(spillage_rate(tmp, ca, origin, paths, args.requests, True, f"signed{n}"))
    best = max(anchor)
    print(f"bare mitmdump (anchor)        {best:8.1f} req/s  (rounds: {', '.join(f'{r:.1f}' for r in anchor)})")
    for label, runs in (("spillage, checkpoints off", unsigned), ("spillage, signed checkpoints", signed)):
        rate, records = max(runs)
        print(f"{label:<29} {rate:8.1f} req/s  {best / rate:5.2f}x anchor time per request "
              f"({records} records; rounds: {', '.join(f'{r:.1f}' for r, _ in runs)})")
    off, on = max(r for r, _ in unsigned), max(r for r, _ in signed)
    print(f"checkpoints cost {100 * (off - on) / off:+.1f}% of throughput")


if __name__ == "__main__":
    main()
