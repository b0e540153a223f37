"""The project version: the one place it is written (pyproject.toml reads it from here when the package
is built). A constant, not a lookup in the installed metadata: importing importlib.metadata and scanning
the installed distributions costs every process that records the version (the proxy among them) ~10 ms."""

SPILLAGE_VERSION = "0.1.0"
