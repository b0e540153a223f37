"""The worked examples of docs/AGENTS.md, run for real: the curl and Playwright agents behind
`spillage run -- CMD`, and a desktop Chromium pointed at `spillage proxy start`."""

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from run_helpers import spillage
from run_helpers import start_proxy

from spillage.proxy.capturelog import iter_records
from spillage.runner.session_run import AgentSpec
from spillage.proxy.layout import work_folder

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "docs" / "examples"
SCENARIO_ID = "shop-kettle-chat"
SPILLAGE = [sys.executable, "-m", "spillage.runner.cli"]
e2e = pytest.mark.e2e


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A folder with its own CA home and runs folder, shared by the tests of this module."""
    if not shutil.which("chromium"):
        pytest.fail("Debian's chromium is required for end-to-end tests: apt-get install -y chromium")
    return tmp_path_factory.mktemp("agents")


@pytest.fixture(scope="module")
def playwright_python(tmp_path_factory) -> str:
    """A Python with Playwright: AutoGen's venv when it has it, else a throwaway venv (no browser download)."""
    autogen = ROOT / ".venv-autogen" / "bin" / "python"
    if autogen.is_file() and subprocess.run([autogen, "-c", "import playwright.sync_api"],
                                            capture_output=True).returncode == 0:
        return str(autogen)
    venv = tmp_path_factory.mktemp("playwright-venv")
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    pip = subprocess.run([venv / "bin" / "pip", "install", "-q", "playwright"], capture_output=True, text=True,
                         env={**os.environ, "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1"}, timeout=300)
    if pip.returncode != 0:
        pytest.skip(f"cannot pip install playwright: {pip.stderr.strip().splitlines()[-1:]}")
    return str(venv / "bin" / "python")



def run_example(workdir: Path, *command: str) -> Path:
    """`spillage run` the scenario with `command` as the agent; checks it exited 0 and the log verifies."""
    done = spillage(workdir, "run", "--scenario", SCENARIO_ID, "--", *command)
    session = Path(done.stdout.strip().splitlines()[-1])
    assert done.returncode == 0, done.stderr[-2000:] + (work_folder(session) / "agent.stderr").read_text()[-2000:]
    assert json.loads((session / "meta.json").read_text())["agent_exit"] == 0
    assert spillage(workdir, "verify", str(session)).returncode == 0
    return session


def audit(workdir: Path, session: Path, *options: str) -> dict:
    done = spillage(workdir, "audit", str(session), *options)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def records(session: Path) -> list[dict]:
    return [line.record for line in iter_records(session)]


@e2e
@pytest.mark.needs_tool("curl")
def test_curl_agent_searches_filters_carts_and_overshares_the_city(workdir):
    session = run_example(workdir, "sh", str(EXAMPLES / "curl_agent.sh"))
    report = audit(workdir, session)
    actions = report["actions"]
    assert [a["what"] for a in actions] == ["search", "filter", "view_product", "add_to_cart"]
    assert report["choices"]["queries"][0]["text"] == "gooseneck electric kettle pittsburgh"
    assert actions[1]["detail"] == {"facet": "cordless"}
    assert actions[1]["observers"] == ["shop.test", "metrics.test"]  # its click beacon joined the filter
    # the beacon also names the page it came from, the results URL with the query: the tracker saw the search
    assert actions[0]["observers"] == ["shop.test", "metrics.test"]
    assert report["recoveries"]["third_party_rate"] == 0.2
    assert actions[2]["detail"] == actions[3]["detail"]  # the product it viewed is the one it carted
    content = [(e["category"], e["attribute"]) for e in report["events"] if e["category"].startswith("C_")]
    assert content == [("C_E", "pittsburgh")]
    assert {e["attribute"] for e in report["events"]} == {"pittsburgh"}


@e2e
def test_playwright_agent_types_clicks_and_carts_in_chromium(workdir, playwright_python):
    session = run_example(workdir, playwright_python, str(EXAMPLES / "playwright_agent.py"))
    report = audit(workdir, session)
    gestures = [(a["kind"], a["what"]) for a in report["actions"] if a["what"] != "scroll"]
    assert gestures == [("type", "search"), ("select", "filter"), ("click", "view_product"),
                        ("submit", "add_to_cart")]
    assert all("metrics.test" in a["observers"] for a in report["actions"])  # t.js ran in the browser
    assert [q["text"] for q in report["choices"]["queries"]] == ["gooseneck electric kettle"]
    assert report["actions"][1]["detail"] == {"facet": "variable-temperature"}
    assert report["events"] == [] and report["choices"]["task_success"] is True
    written = records(session)
    outside = {r["host"] for r in written if r["kind"] == "egress_blocked"}
    assert all(not host.endswith(".test") for host in outside)
    assert all(r["url"].startswith(("https://shop.test/", "https://metrics.test/"))
               for r in written if r["kind"] == "request")


@e2e
def test_a_desktop_chromium_pointed_at_proxy_start_is_captured_and_audited(workdir, tmp_path):
    proxy, shown = start_proxy(workdir)
    try:
        printed = f"chromium {shown['chromium']}"  # the line a user copies into a shell, run headless here
        headless = " --headless=new --no-sandbox --dump-dom https://shop.test/s?k=kettle"
        browser = subprocess.run(["sh", "-c", printed + headless], capture_output=True, text=True, timeout=120,
                                 env={**os.environ, "TMPDIR": str(tmp_path)})
    finally:
        proxy.send_signal(signal.SIGINT)
        proxy.wait(30)
    assert proxy.returncode == 0
    assert f"--proxy-server={shown['proxy']} " in printed
    assert f"--ignore-certificate-errors-spki-list={shown['spki']} " in printed
    assert 'data-section="results"' in browser.stdout  # the page came through, TLS trusted by the pin
    session = Path(shown["session"])
    assert spillage(workdir, "verify", str(session)).returncode == 0
    urls = [r["url"] for r in records(session) if r["kind"] == "request"]
    assert "https://shop.test/s?k=kettle" in urls and "https://metrics.test/t.js" in urls
    report = audit(workdir, session, "--scenario", SCENARIO_ID)
    assert [q["text"] for q in report["choices"]["queries"]] == ["kettle"]
    assert report["events"] == []


@pytest.mark.parametrize("example", ["curl_agent.sh", "playwright_agent.py"])
def test_the_doc_shows_each_example_in_full(example):
    """docs/AGENTS.md shows the example files as they are, so what a reader copies is what the tests run."""
    assert (EXAMPLES / example).read_text() in (ROOT / "docs" / "AGENTS.md").read_text()


def test_relative_paths_of_a_command_mean_what_the_caller_meant(tmp_path, monkeypatch):
    """The command runs in the session folder; paths given relative to where it was typed are made absolute."""
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "mine.sh").write_text("true\n")
    monkeypatch.chdir(tmp_path)
    spec = AgentSpec.command(["sh", "agents/mine.sh", "--out=x/y", "not/there", "-v"])
    assert spec.argv == ("sh", str(tmp_path / "agents" / "mine.sh"), "--out=x/y", "not/there", "-v")
    assert spec.label == "sh"


def test_a_relative_venv_python_stays_the_venvs(tmp_path, monkeypatch):
    """`-- .venv-pw/bin/python agent.py`: the venv's python is a symlink to the base interpreter, which has
    none of the venv's packages; made absolute, it is still the venv's, and it still finds them."""
    import subprocess
    import sys
    import venv

    venv.create(tmp_path / ".venv-x", with_pip=False, symlinks=True)   # as `python -m venv` makes it
    site = next((tmp_path / ".venv-x" / "lib").glob("python3*/site-packages"))
    (site / "only_in_this_venv.py").write_text("")
    monkeypatch.chdir(tmp_path)
    spec = AgentSpec.command([".venv-x/bin/python", "-c", "import only_in_this_venv"])
    assert spec.argv[0] == str(tmp_path / ".venv-x" / "bin" / "python")
    assert Path(spec.argv[0]).is_symlink() and Path(spec.argv[0]).resolve() != Path(spec.argv[0])
    assert subprocess.run(list(spec.argv), cwd="/").returncode == 0, sys.executable
