"""The catalog store: each catalog built once, kept by content hash, found again without building."""

import json
import os
import stat
import subprocess
import sys

import pytest

import spillage.origins.catalog as catalog_module
from spillage.audit.session_catalog import CatalogError
from spillage.audit.session_catalog import session_catalog
from spillage.origins.catalog import load_benchmark
from spillage.proxy.layout import file_sha256
from spillage.origins.catalog_store import find_catalog
from spillage.origins.catalog_store import stored_catalog


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    return tmp_path_factory.mktemp("home")


@pytest.fixture(scope="module")
def default(home):
    return stored_catalog(home)


def test_a_catalog_is_built_once_and_kept_read_only_under_its_hash(home, default, monkeypatch):
    path, sha256 = default
    assert path == home / "catalogs" / f"{sha256}.sqlite" and file_sha256(path) == sha256
    assert not os.stat(path).st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    assert stored_catalog(home, load_benchmark(), 0) == default  # the same scenarios given as a list: same bytes

    def no_build(*args, **kwargs):
        raise AssertionError("built again")

    monkeypatch.setattr(catalog_module, "build_catalog", no_build)
    assert stored_catalog(home) == default
    assert stored_catalog(home, load_benchmark(), 0) == default


def test_the_benchmarks_catalog_is_found_without_parsing_a_scenario(home, default, monkeypatch):
    import spillage.scenarios.loader as loader

    def no_parse(*args, **kwargs):
        raise AssertionError("parsed")

    monkeypatch.setattr(loader, "load_file", no_parse)
    assert stored_catalog(home) == default


def test_another_seed_is_another_catalog(home, default):
    path, sha256 = stored_catalog(home, None, 1)
    assert sha256 != default[1] and path.is_file()


def test_the_inputs_key_does_not_depend_on_the_process(tmp_path):
    code = "from spillage.origins.catalog_store import inputs_key; print(inputs_key(None, 0))"
    keys = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2", "3")}
    assert len(keys) == 1


def test_a_stored_file_that_does_not_hash_to_its_name_is_not_found(tmp_path, default):
    path, sha256 = default
    copy_home = tmp_path / "home"
    (copy_home / "catalogs").mkdir(parents=True)
    damaged = copy_home / "catalogs" / path.name
    damaged.write_bytes(path.read_bytes()[:-1] + b"\0")
    assert find_catalog(copy_home, sha256) is None


def session_with(tmp_path, catalog: dict) -> object:
    folder = tmp_path / "s"
    folder.mkdir(parents=True)
    (folder / "meta.json").write_text(json.dumps({"catalog": catalog}))
    return folder


def test_the_audit_finds_a_sessions_catalog_in_the_store(tmp_path, home, default):
    folder = session_with(tmp_path, {"sha256": default[1], "seed": 0, "adds": None})
    found = session_catalog(folder, None, None, home)
    assert (found.path, found.source, found.sha256) == (default[0], "store", default[1])


def test_a_catalog_missing_from_the_store_is_rebuilt_and_its_hash_checked(tmp_path, default):
    folder = session_with(tmp_path, {"sha256": default[1], "seed": 0, "adds": None})
    found = session_catalog(folder, None, None, tmp_path / "empty-home")
    assert found.source == "rebuilt" and found.sha256 == default[1] and file_sha256(found.path) == default[1]
    other = session_with(tmp_path / "x", {"sha256": "0" * 64, "seed": 0, "adds": None})
    with pytest.raises(CatalogError, match="is not what seed 0 builds"):
        session_catalog(other, None, None, tmp_path / "empty-home")
