"""Fixtures shared by the test modules."""

import pytest

from spillage.origins.catalog import build_catalog


@pytest.fixture(scope="session")
def catalog_file(tmp_path_factory):
    """The default catalog (the benchmark's scenarios, seed 0), built once per test run."""
    path = tmp_path_factory.mktemp("catalog") / "catalog.sqlite"
    build_catalog(path)
    return path
