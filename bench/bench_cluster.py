"""Cells per minute of `spillage batch --scheduler` with 1, 2, 4 and 8 local Dask workers, against the
ideal (N times one worker's rate), when the agent waits on its model as an LLM agent does.

    python bench/bench_cluster.py [--workers 1 2 4 8] [--cells-per-worker 2] [--steps 5] [--think 3]

Each cell is a real `spillage run` (its own origins, proxy and signed capture log) whose agent is a
command that, `--steps` times, waits `--think` seconds (the model thinking) and then loads a page of
shop.test through the proxy. The cells go through the cluster code of the batch (runner/cluster.py:
`run_cell` on a worker with one browser each, the session verified there, sent back as an archive and
verified again on arrival); only the matrix is left out, since a matrix cannot name a command agent.
A LocalCluster of N single-threaded worker processes runs N × `--cells-per-worker` cells; the wall
time runs from the first submit to the last arrival. Per cell (medians): `cell s` on its worker
(preparing, `spillage run`, verifying, packing), `agent s` of it the agent's own (meta.json),
`arrive s` on the client (unpacking and verifying again). On a machine of few cores this shows what the
engine adds, not CPU scaling: the agents spend their time waiting. The load average (/proc/loadavg,
1 minute) before and after tells how busy the machine was.
"""

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from spillage.proxy.layout import read_meta
from spillage.runner.batch import prepare_home
from spillage.runner.cluster import BROWSER
from spillage.runner.cluster import Cell
from spillage.runner.cluster import receive
from spillage.runner.cluster import run_cell
from spillage.scenarios.loader import resolve_scenario

AGENT = textwrap.dedent("""\
    import os, sys, time, urllib.request
    steps, think = int(sys.argv[1]), float(sys.argv[2])
    proxy = os.environ["SPILLAGE_PROXY"]
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy, "https": proxy}))
    for step in range(steps):
        time.sleep(think)  # the model thinking
        opener.open(f"https://shop.test/s?k=kettle+{step}", timeout=30).read()
    print("finished", steps, "steps")
""")


def load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def level(workers: int, cells: int, agent: Path, steps: int, think: float, out: Path) -> dict:
    """Run `cells` cells on a LocalCluster of `workers` workers; its numbers."""
    from distributed import Client
    from distributed import LocalCluster
    from distributed import as_completed

    before = load()
    batch = f"bench-{secrets.token_hex(4)}"
    arguments = ("--timeout", "300", "--audit", "--", sys.executable, str(agent), str(steps), str(think))
    with LocalCluster(n_workers=workers, threads_per_worker=1, resources={BROWSER: 1}, dashboard_address=None,
                      processes=True) as cluster, Client(cluster) as client:
        client.wait_for_workers(workers)
        began = time.monotonic()
        futures = [client.submit(run_cell, cell, key=cell.task, resources={BROWSER: 1}, pure=False)
                   for cell in (Cell(f"cell-{i:03d}", "shop-kettle-chat", arguments, batch) for i in range(cells))]
        cell, agent, arrival = [], [], []
        for future in as_completed(futures):
            result = future.result()
            dest = out / batch / result.key
            dest.parent.mkdir(parents=True, exist_ok=True)
            received = time.monotonic()
            problem = receive(result, dest)
            if result.exit_code != 0 or problem:
                sys.exit(f"bench: {result.key} exited {result.exit_code}: {problem}\n{result.log.decode()[-2000:]}")
            arrival.append(time.monotonic() - received)
            cell.append(result.seconds)
            agent.append(read_meta(dest)["agent_seconds"])
            future.release()
        wall = time.monotonic() - began
    return {"workers": workers, "cells": len(cell), "wall": wall, "per_minute": len(cell) / wall * 60,
            "cell": statistics.median(cell), "agent": statistics.median(agent),
            "arrival": statistics.median(arrival), "load_before": before, "load_after": load()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--cells-per-worker", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--think", type=float, default=3.0, help="seconds the agent waits before each step")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="spillage-bench-cluster-") as tmp:
        home = Path(tmp) / "home"
        os.environ["SPILLAGE_HOME"] = str(home)  # the workers' home, inherited
        prepare_home(home, [resolve_scenario("shop-kettle-chat")], 0, False)  # the catalog, built once, not timed
        agent = Path(tmp) / "slow_agent.py"
        agent.write_text(AGENT, encoding="utf-8")
        print(f"agent: {args.steps} steps, {args.think:g} s of thinking before each; "
              f"{args.cells_per_worker} cells per worker; {os.cpu_count()} cores", flush=True)
        print(f"{'workers':>7} {'cells':>5} {'wall s':>7} {'cells/min':>9} {'ideal':>7} {'of ideal':>8} "
              f"{'cell s':>6} {'agent s':>7} {'arrive s':>8} {'load':>11}", flush=True)
        base = None
        for n in args.workers:
            row = level(n, n * args.cells_per_worker, agent, args.steps, args.think, Path(tmp) / "out")
            base = base or row["per_minute"] / row["workers"]
            ideal = base * n
            print(f"{n:>7} {row['cells']:>5} {row['wall']:>7.1f} {row['per_minute']:>9.2f} {ideal:>7.2f} "
                  f"{row['per_minute'] / ideal:>8.0%} {row['cell']:>6.1f} {row['agent']:>7.1f} {row['arrival']:>8.2f} "
                  f"{row['load_before']:>5.2f}→{row['load_after']:<5.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
