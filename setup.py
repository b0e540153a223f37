"""The package's one compiled module; everything else is in pyproject.toml."""

from setuptools import Extension, setup

# verify's one pass over a log's lines (proxy/linecheck.py), against OpenSSL's SHA-256 (Debian: libssl-dev).
# Optional: without a compiler or the headers the package installs without it, and verify reads every line
# the Python way (slower, the same verdicts).
setup(ext_modules=[Extension("spillage.proxy._linecheck", ["proxy/_linecheck.c"], libraries=["crypto"],
                             extra_compile_args=["-O2"], optional=True)])
