"""The rooms along the wire: each folder imports only the rooms below it (docs/ARCHITECTURE.md, Rooms).

Read from the source (every import, also those inside functions), and from what a fresh interpreter
loads: the auditor, the reports and the evidence core run without mitmproxy.
"""

import ast
import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[1]

# Each room and the rooms it may import (itself always). The floors, bottom up: proxy (the evidence core,
# the reading of a request, the file formats); scenarios; origins; audit; reports and addons (the live
# proxy); runner (the host's orchestration and the command line). agents/ runs in the agent's process.
MAY_IMPORT = {
    "proxy": set(),
    "scenarios": {"proxy"},
    "origins": {"proxy", "scenarios"},
    "agents": {"proxy.layout", "proxy.settings", "scenarios"},
    "audit": {"proxy", "scenarios", "origins"},
    "reports": {"proxy", "scenarios", "origins", "audit"},
    "addons": {"proxy", "scenarios", "origins", "audit"},
    "runner": {"proxy", "scenarios", "origins", "audit", "reports", "addons", "agents"},
}
# Where mitmproxy may be imported: the live proxy, and the formats that read and write its flows.
MITMPROXY_IN = ("addons/", "proxy/formats/")


def imports(path: Path) -> set[str]:
    """Every module `path` imports, at its top or inside a function."""
    return {module for module, _ in imported_names(path)}


def imported_names(path: Path) -> set[tuple[str, str | None]]:
    """(module, name) of every import of `path`, at its top or inside a function; name None for `import m`."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.update((node.module, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update((alias.name, None) for alias in node.names)
    return found


def allowed(room: str, module: str) -> bool:
    """Whether a module of `room` may import the spillage module `module` (spillage.<room>.<...>)."""
    target = module.removeprefix("spillage.")
    return target.split(".")[0] == room or any(target == a or target.startswith(a + ".")
                                                for a in MAY_IMPORT[room])


def test_every_folder_is_a_room():
    folders = {p.parent.name for p in SOURCE.glob("*/__init__.py")}
    assert folders - {"tests", "bench"} == set(MAY_IMPORT)


@pytest.mark.parametrize("room", sorted(MAY_IMPORT))
def test_a_room_imports_only_downward(room):
    upward = [f"{path.relative_to(SOURCE)}: {module}"
              for path in sorted((SOURCE / room).rglob("*.py"))
              for module in sorted(imports(path))
              if module.startswith("spillage.") and not allowed(room, module)]
    assert upward == []


@pytest.mark.parametrize("room", sorted(MAY_IMPORT))
def test_mitmproxy_only_in_the_live_proxy_and_its_flow_formats(room):
    found = [str(path.relative_to(SOURCE)) for path in sorted((SOURCE / room).rglob("*.py"))
             if not str(path.relative_to(SOURCE)).startswith(MITMPROXY_IN)
             and any(m == "mitmproxy" or m.startswith("mitmproxy.") for m in imports(path))]
    assert found == []


def test_the_fence_sees_an_upward_import(tmp_path):
    wrong = tmp_path / "wrong.py"
    wrong.write_text("def f():\n    from spillage.runner.cli import main\n    import mitmproxy.http\n")
    assert {"spillage.runner.cli", "mitmproxy.http"} <= imports(wrong)
    assert not allowed("audit", "spillage.runner.cli") and allowed("runner", "spillage.audit.model")
    assert allowed("agents", "spillage.proxy.layout") and not allowed("agents", "spillage.proxy.capturelog")


def test_every_name_a_benchmark_imports_from_the_rooms_exists():
    """The benchmarks are run by hand (docs/BENCHMARKS.md), so nothing else notices a name that moved."""
    missing = []
    for path in sorted((SOURCE / "bench").glob("*.py")):
        for module, name in sorted(imported_names(path), key=str):
            if not module.startswith("spillage."):
                continue
            found = importlib.import_module(module)
            if name is not None and not hasattr(found, name) and importlib.util.find_spec(f"{module}.{name}") is None:
                missing.append(f"{path.name}: {module}.{name}")
    assert missing == []


def loaded_after(modules: list[str]) -> list[str]:
    """The mitmproxy, spillage.addons and spillage.runner modules a fresh interpreter holds after
    importing `modules`."""
    code = ("import sys\n" + "".join(f"import {m}\n" for m in modules)
            + "print('\\n'.join(sorted(n for n in sys.modules if n.split('.')[0] == 'mitmproxy'"
            " or n.startswith(('spillage.addons', 'spillage.runner', 'spillage.agents')))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.split()


CORE = ("capturelog", "layout", "merkle", "signing", "verify", "proofs", "refusal", "hosts", "seal", "version",
        "reading", "settings")


def test_the_evidence_core_and_the_reading_load_no_mitmproxy_and_nothing_above_them():
    assert loaded_after([f"spillage.proxy.{m}" for m in CORE]) == []


def test_the_auditor_and_the_reports_load_no_mitmproxy():
    assert loaded_after(["spillage.audit.session_audit", "spillage.audit.batch", "spillage.audit.diff",
                         "spillage.reports.timeline", "spillage.reports.batch_report",
                         "spillage.reports.inspect_html"]) == []


def test_the_agents_sandbox_shows_the_rooms_the_agent_side_imports():
    """The sandbox binds spillage's packages read-only, room by room (runner/sandbox.py): the agent side
    and what it may import, and runner/ for the sandbox's first process. One left out is a module the
    agent's adapter cannot import there."""
    from spillage.runner.sandbox import PACKAGES

    assert {"agents", "runner", *(room.split(".")[0] for room in MAY_IMPORT["agents"])} <= set(PACKAGES)
