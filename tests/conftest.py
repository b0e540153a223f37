"""Fixtures shared by the test modules."""

import pytest

from spillage.origins.catalog import build_catalog


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
