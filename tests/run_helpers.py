"""Running the `spillage` command from end-to-end tests: one command, every scripted policy of a
framework, and `spillage proxy start` read up to its Chromium line."""

import json
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

SPILLAGE = [sys.executable, "-m", "spillage.runner.cli"]


def spillage(workdir: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """The spillage command in `workdir` (its CA under .spillage/, sessions under runs/)."""
    return subprocess.run([*SPILLAGE, *args], cwd=workdir, capture_output=True, text=True, timeout=timeout)


def needs_chromium() -> None:
    if not shutil.which("chromium"):
        pytest.fail("Debian's chromium is required for end-to-end tests: apt-get install -y chromium")


def run_policies(workdir: Path, agent: str, runs: list[tuple[str, str]], *extra: str,
                 timeout: float = 300, jobs: int = 1) -> dict[tuple[str, str], tuple[Path, dict]]:
    """Run and audit every (scenario, policy) of `runs` with `agent`, `jobs` at a time: (session folder,
    audit report) for each. browser-use runs go one after the other: on a loaded machine its quick
    steps stretch, and what the trackers count as dwelt on changes; AutoGen waits for each page and
    3 s after every scroll, which leaves room for a few runs at once."""
    needs_chromium()

    def run_one(scenario: str, policy: str) -> tuple[Path, dict]:
        ran = spillage(workdir, "run", "--scenario", scenario, "--agent", agent, "--model", f"scripted:{policy}",
                       *extra, timeout=timeout)
        assert ran.returncode == 0, f"{scenario} {policy}: {ran.stderr[-3000:]}"  # 0: the agent finished
        session = Path(ran.stdout.strip().splitlines()[-1])
        audited = spillage(workdir, "audit", str(session))
        assert audited.returncode == 0, audited.stderr
        return session, json.loads(audited.stdout)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {run: pool.submit(run_one, *run) for run in runs}
        return {run: future.result() for run, future in futures.items()}


def categories(report: dict) -> set[str]:
    """The event categories an audit found."""
    return {e["category"] for e in report["events"]}


def start_proxy(workdir: Path, *args: str, **popen) -> tuple[subprocess.Popen, dict[str, str]]:
    """`spillage proxy start --port 0 ARGS`, and what it printed up to its Chromium line (proxy, ca,
    spki, session, chromium)."""
    proxy = subprocess.Popen([*SPILLAGE, "proxy", "start", "--port", "0", *args], cwd=workdir, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, **popen)
    shown = {}
    for line in proxy.stdout:
        key, _, value = line.partition(" ")
        shown[key] = value.strip()
        if key == "chromium":
            break
    return proxy, shown
