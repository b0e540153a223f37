"""The project version, read from the installed package metadata."""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version

try:
    SPILLAGE_VERSION = version("spillage")
except PackageNotFoundError:  # running from a source tree that was never installed
    SPILLAGE_VERSION = "0+unknown"
