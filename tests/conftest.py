"""Fixtures shared by the test modules, and the two markers that say what a test needs from outside.

    @pytest.mark.needs_tool("tshark")   # or "curl", "bwrap", "go" (with Debian's golang.org/x/mod), "autogen"
    @pytest.mark.shared_data("data/spillage/shopping_Amazon_chat.json")   # a file under ../shared

A missing tool skips the test with what to install, or fails it when SPILLAGE_REQUIRE_TOOLS is set
(`make test` sets it after installing them, so a test it cannot run is an error, never a silent
skip). Missing ../shared data (the paper's released data, not in a fresh clone) always skips.
"""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from spillage.origins.catalog import build_catalog

REQUIRE_TOOLS = "SPILLAGE_REQUIRE_TOOLS"
SHARED = Path(__file__).resolve().parents[2] / "shared"
# What each needs_tool name is installed with; any other name is a command on PATH, a Debian package.
INSTALL = {"autogen": "make autogen", "go": "apt-get install -y golang-go golang-golang-x-mod-dev",
           "bwrap": "apt-get install -y bubblewrap"}
DOWNLOADS_BEFORE = pytest.StashKey[set]()
GO_X_MOD = Path("/usr/share/gocode/src/golang.org/x/mod/sumdb/note")   # Debian's golang-golang-x-mod-dev


def tools_required() -> bool:
    """Whether a missing tool fails the test instead of skipping it (`make test` sets the variable)."""
    return os.environ.get(REQUIRE_TOOLS, "") not in ("", "0")


def tool_missing(name: str) -> str | None:
    """Why tool `name` cannot be used here, with what installs it; None when it can."""
    if name == "autogen":
        from spillage.runner import autogen_venv

        venv = autogen_venv.venv_dir()
        if autogen_venv.is_complete(venv):
            return None
        why = f"AutoGen's venv is not there ({venv})"
    elif name == "go" and shutil.which("go") and not GO_X_MOD.is_dir():
        why = f"Go's golang.org/x/mod is not in {GO_X_MOD.parents[3]}"
    elif shutil.which(name):
        return None
    else:
        why = f"{name} is not on PATH"
    return f"{why}: {INSTALL.get(name, f'apt-get install -y {name}')}"


def shared_data_missing(relative: str = "") -> str | None:
    """Why ../shared (or the file `relative` inside it) cannot be read here; None when it can."""
    path = SHARED / relative
    return None if path.exists() else f"{path} is not here (a fresh clone has no ../shared)"


def missing_tools(item) -> list[str]:
    """What is missing of the tools `item` is marked as needing (@pytest.mark.needs_tool)."""
    found = (tool_missing(name) for marker in item.iter_markers("needs_tool") for name in marker.args)
    return [why for why in found if why]


def downloads_folders() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("browser-use-downloads-*"))


def pytest_sessionstart(session):
    session.config.stash[DOWNLOADS_BEFORE] = downloads_folders()


def pytest_sessionfinish(session):
    """Importing browser-use makes an empty downloads folder in the system temp: the run takes away the
    empty ones that came while it ran."""
    for folder in downloads_folders() - session.config.stash.get(DOWNLOADS_BEFORE, set()):
        try:
            folder.rmdir()
        except OSError:
            pass   # not empty, or not ours to remove


def pytest_collection_modifyitems(items):
    """A test whose ../shared data or tool is missing is marked skipped, with why (listed by -ra) and
    what to install; when SPILLAGE_REQUIRE_TOOLS is set a missing tool fails it instead (below)."""
    for item in items:
        for marker in item.iter_markers("shared_data"):
            why = shared_data_missing(*marker.args)
            if why:
                item.add_marker(pytest.mark.skip(reason=why))
        if not tools_required():
            for why in missing_tools(item):
                item.add_marker(pytest.mark.skip(reason=f"{why} (make test does)"))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """With SPILLAGE_REQUIRE_TOOLS set (make test), a missing tool fails the test before its fixtures."""
    if tools_required():
        for why in missing_tools(item):
            pytest.fail(f"{why} ({REQUIRE_TOOLS} is set: make test installs it first)", pytrace=False)


@pytest.fixture(scope="session")
def catalog_file(tmp_path_factory):
    """The default catalog (the benchmark's scenarios, seed 0), built once per test run."""
    path = tmp_path_factory.mktemp("catalog") / "catalog.sqlite"
    build_catalog(path)
    return path


@pytest.fixture(scope="session")
def profiles(catalog_file):
    """The site profiles (grammar and catalog facts) of the default catalog."""
    from spillage.origins.knowledge import site_profiles

    return site_profiles(catalog_file)


@pytest.fixture(scope="session")
def shop(profiles):
    """shop.test's profile in the default catalog."""
    return profiles["shop.test"]
