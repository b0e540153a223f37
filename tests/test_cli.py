"""The command line itself: what `--version` says, and that the version is written in one place."""

import subprocess
import sys
from importlib.metadata import version

from spillage.proxy.version import SPILLAGE_VERSION


def test_version_names_ours_mitmproxys_and_pythons_and_exits_0():
    ran = subprocess.run([sys.executable, "-m", "spillage.runner.cli", "--version"], capture_output=True, text=True)
    assert ran.returncode == 0 and ran.stderr == ""
    assert ran.stdout == (f"spillage {SPILLAGE_VERSION} (mitmproxy {version('mitmproxy')}, "
                          f"Python {sys.version.split()[0]})\n")


def test_the_installed_version_is_the_one_in_the_code():
    assert version("spillage") == SPILLAGE_VERSION   # pyproject.toml reads proxy/version.py
