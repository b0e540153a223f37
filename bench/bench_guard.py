"""What the leak guard adds to each request, against the same proxy with the guard off, in one run.

    python bench/bench_guard.py                       # records an oversharer session first (~15 s)
    python bench/bench_guard.py --session runs/DIR    # replays the requests of a session you have
    python bench/bench_guard.py --rounds 7 --mode block   # 15 rounds by default

Two stacks as `spillage run` starts them (origins, capturing proxy with signed checkpoints), one with
`--guard off` (A, the anchor) and one with the guard in `--mode` (B, default redact) guarding the
session's scenario (its copy in the session; without --session, an oversharer run of SCENARIO). Every request the agent made in the session (pages, suggestions, tracker and
site-log beacons, forms; in order, with their headers and bodies) is sent through each proxy over
one keep-alive connection, in interleaved rounds (A B, B A, ...). Each request's latency is the
median over rounds; the added latency of a request is B's median minus A's. Printed: p50 and p99 of
A, of B, and of the added latency, over all requests and over the requests the guard changed or
answered; then the guard's own decision time per request, measured in-process (GuardEngine.decide), with
the senses' near words (scenarios/senses_near.yaml) and, interleaved, without them.
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCENARIO = "shop-kettle-chat"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def session_requests(session: Path) -> list[tuple[str, str, list[tuple[str, str]], bytes]]:
    """(method, url as plain http, headers, body) of every request record of `session`, in order."""
    from spillage.proxy.capturelog import iter_records
    from spillage.proxy.capturelog import read_body

    found = []
    for line in iter_records(session):
        r = line.record
        if r["kind"] == "request":
            url = "http://" + r["url"].split("://", 1)[1]
            headers = [(k, v) for k, v in r["headers"] if k.lower() not in ("content-length", "connection")]
            found.append((r["method"], url, headers, read_body(session, r["body"])))
    return found


def record_session(folder: Path) -> Path:
    """An oversharer session of SCENARIO, recorded with `spillage run` (guard off)."""
    done = subprocess.run([sys.executable, "-m", "spillage.runner.cli", "run", "--scenario", SCENARIO,
                           "--model", "scripted:oversharer", "--runs-dir", str(folder / "runs")],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        sys.exit(f"bench: recording a session failed:\n{done.stderr[-2000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def send_all(proxy: str, requests) -> list[float]:
    """Each request through `proxy` on one keep-alive connection; seconds per request."""
    connection = http.client.HTTPConnection(proxy, timeout=30)
    took = []
    for method, url, headers, body in requests:
        began = time.perf_counter()
        connection.putrequest(method, url, skip_host=True, skip_accept_encoding=True)
        for name, value in headers:
            connection.putheader(name, value)
        if body or method in ("POST", "PUT", "PATCH"):
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body or None)
        response = connection.getresponse()
        response.read()
        took.append(time.perf_counter() - began)
        if response.getheader("connection", "").lower() == "close":
            connection.close()
            connection = http.client.HTTPConnection(proxy, timeout=30)
    connection.close()
    return took


def use_near_words(near_file: Path) -> None:
    """Read word senses with the near words of `near_file` from here on (their caches emptied)."""
    from spillage.audit.judges import context
    from spillage.scenarios import senses

    senses.NEAR_FILE = near_file
    for cached in (senses.near_lexicon, senses.near_words, context.look_alike):
        cached.cache_clear()


def decisions(scenario, catalog: Path, mode: str, requests, repeat: int,
              empty: Path) -> tuple[dict[str, list[float]], set[int]]:
    """GuardEngine.decide's own time per request, in-process, with the senses' near words and without
    them (an `empty` lexicon): best of `repeat` fresh guards going through the session, the two
    interleaved, each after an untimed pass that fills the sense readings' caches again, as a running
    proxy has them; and the requests it changes or answers."""
    from mitmproxy import http

    from spillage.addons.guard_engine import GuardEngine
    from spillage.addons.guard_policy import default_policy
    from spillage.origins.knowledge import site_profiles
    from spillage.scenarios import senses

    profiles = site_profiles(catalog)
    made = [http.Request.make(m, u, b, dict(h)) for m, u, h, b in requests]
    lexicons = {"near words": senses.NEAR_FILE, "no near words": empty}
    best, changed = {name: [float("inf")] * len(made) for name in lexicons}, set()
    for n in range(repeat):
        for name in (list(lexicons) if n % 2 == 0 else list(lexicons)[::-1]):
            use_near_words(lexicons[name])
            warm = GuardEngine(default_policy(mode, scenario.irrelevant), profiles)
            for request in made:
                warm.decide(request)
            guard = GuardEngine(default_policy(mode, scenario.irrelevant), profiles)
            for i, request in enumerate(made):
                began = time.perf_counter()
                if guard.decide(request) is not None and name == "near words":
                    changed.add(i)
                best[name][i] = min(best[name][i], time.perf_counter() - began)
    use_near_words(lexicons["near words"])
    return best, changed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--session", type=Path, help="a session whose requests to send (default: record one)")
    parser.add_argument("--mode", choices=("monitor", "redact", "block"), default="redact")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()

    from spillage.origins.catalog import build_catalog
    from spillage.proxy.capturelog import iter_records
    from spillage.addons.mitm.ca import ensure_ca
    from spillage.proxy.signing import load_or_create_key
    from spillage.runner.stack import GuardSetting
    from spillage.runner.stack import Stack
    from spillage.scenarios.dump import scenario_yaml
    from spillage.proxy.layout import SCENARIO_COPY
    from spillage.scenarios.loader import load_scenario

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        session = args.session or record_session(tmp)
        scenario = load_scenario(session / SCENARIO_COPY)   # the session's own: its irrelevant attributes
        requests = session_requests(session)
        catalog = tmp / "sites.sqlite"
        build_catalog(catalog)
        (tmp / "guarded.yaml").write_text(scenario_yaml(scenario), encoding="utf-8")
        ca, key = ensure_ca(tmp / "ca"), load_or_create_key(tmp)
        folders = {name: tmp / name for name in "AB"}
        for folder in folders.values():
            folder.mkdir()
        guard = GuardSetting(args.mode, "", tmp / "guarded.yaml")
        quiet = lambda message: None  # noqa: E731
        with Stack(folders["A"], ca, key, catalog, log=quiet) as a, \
                Stack(folders["B"], ca, key, catalog, log=quiet, guard=guard) as b:
            proxies = {"A": a.proxy_url.removeprefix("http://"), "B": b.proxy_url.removeprefix("http://")}
            load = Path("/proc/loadavg").read_text().split()[:3]
            for name in "AB":
                send_all(proxies[name], requests)   # warm-up: certificates, caches, the guard's knowledge
            times: dict[str, list[list[float]]] = {"A": [], "B": []}
            for n in range(args.rounds):
                for name in ("AB" if n % 2 == 0 else "BA"):
                    times[name].append(send_all(proxies[name], requests))
        guarded = sum(1 for line in iter_records(folders["B"]) if line.record["kind"] == "guard")
        per = {name: [statistics.median(r[i] for r in rounds) for i in range(len(requests))]
               for name, rounds in times.items()}
        added = [b - a for a, b in zip(per["A"], per["B"])]
        (tmp / "empty.yaml").write_text("terms: {}\nclasses: {}\n", encoding="utf-8")
        decide, changed = decisions(scenario, catalog, args.mode, requests, args.rounds, tmp / "empty.yaml")
        ms = lambda s: f"{s * 1000:.2f} ms"  # noqa: E731
        print(f"session {session.name}: {len(requests)} requests, {args.rounds} rounds, guard {args.mode} "
              f"({guarded} guard records over {args.rounds + 1} passes; {len(changed)} of the requests changed "
              f"or answered), load {' '.join(load)}")
        for label, pick in (("all requests", set(range(len(requests)))), ("requests the guard changed", changed)):
            if not pick:
                continue
            a_ = [per["A"][i] for i in pick]
            b_ = [per["B"][i] for i in pick]
            d_ = [added[i] for i in pick]
            print(f"  {label} ({len(pick)}): A off p50 {ms(percentile(a_, .5))} p99 {ms(percentile(a_, .99))}; "
                  f"B {args.mode} p50 {ms(percentile(b_, .5))} p99 {ms(percentile(b_, .99))}; "
                  f"added p50 {ms(percentile(d_, .5))} p99 {ms(percentile(d_, .99))}")
        for name, took in decide.items():
            print(f"  GuardEngine.decide in-process, {name}: p50 {ms(percentile(took, .5))} "
                  f"p99 {ms(percentile(took, .99))} max {ms(max(took))}")


if __name__ == "__main__":
    main()
