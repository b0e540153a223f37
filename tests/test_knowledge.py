"""Site knowledge: both sites' URL grammars, the catalog facts, the JSON export and its command."""

import dataclasses
import json
import re
from pathlib import Path

import pytest

import spillage.scenarios
from spillage.origins.catalog import Facet
from spillage.origins.catalog import load_benchmark
from spillage.origins.catalog import with_benchmark
from spillage.origins.knowledge import GRAMMARS, knowledge_json, profiles, site_profiles
from spillage.runner.cli import main
from spillage.runner.session_run import catalog_scenarios
from spillage.scenarios.loader import load_scenario

SCENARIOS = Path(spillage.scenarios.__file__).parent
KETTLE_FILE = SCENARIOS / "shop" / "kettle.yaml"
SMALL = [KETTLE_FILE, SCENARIOS / "bazaar" / "film-camera.yaml"]


@pytest.fixture(scope="module")
def knowledge(catalog_file):
    return knowledge_json(catalog_file)


@pytest.fixture(scope="module")
def sites(catalog_file):
    return site_profiles(catalog_file)


# --- URL grammars ------------------------------------------------------------------------

PAGES = {  # host → (grammar field, path, what group 1 names)
    "shop.test": [("category_path", "/c/kettles", "kettles"), ("section_path", "/b/kosher-kitchen", "kosher-kitchen"),
                  ("product_path", "/p/10241", "10241")],
    "bazaar.test": [("category_path", "/b/cameras", "cameras"), ("section_path", "/e/deals", "deals"),
                    ("product_path", "/itm/304000000001", "304000000001")],
}


@pytest.mark.parametrize("host, field, path, named", [(h, *page) for h, pages in PAGES.items() for page in pages])
def test_page_paths_name_what_they_show(host, field, path, named):
    grammar = GRAMMARS[host]
    assert re.fullmatch(getattr(grammar, field), path).group(1) == named
    assert not re.fullmatch(getattr(grammar, field), path + "/ask")
    others = [f for f in ("category_path", "section_path", "product_path") if f != field]
    assert not any(re.fullmatch(getattr(grammar, f), path) for f in others)


@pytest.mark.parametrize("host, search, query, facets, category, suggest, product_field", [
    ("shop.test", "/s", ("k",), ("f",), "i", "/suggest", "product_id"),
    ("bazaar.test", "/sch/", ("_nkw",), ("_aspect", "LH_ItemCondition"), "_sacat", "/autosug", "item_id"),
])
def test_search_suggest_and_cart_parameters(host, search, query, facets, category, suggest, product_field):
    g = GRAMMARS[host]
    assert (g.search_paths, g.query_params, g.facet_params, g.category_param) == ((search,), query, facets, category)
    assert (g.suggest_path, g.suggest_param) == (suggest, "q")
    assert (g.cart_add_path, g.product_field) == ("/cart/add", product_field)


@pytest.mark.parametrize("host, path, expected", [
    ("shop.test", "/p/10241/ask", ("ask", "10241")),
    ("shop.test", "/list/add", ("list-add", None)),
    ("shop.test", "/cart/remove", ("cart-remove", None)),
    ("shop.test", "/checkout", ("checkout", None)),
    ("shop.test", "/cart/add", None),           # a choice, not a form of words
    ("shop.test", "/contact", None),
    ("bazaar.test", "/itm/304000000001/offer", ("offer", "304000000001")),
    ("bazaar.test", "/itm/304000000001/ask", ("ask", "304000000001")),
    ("bazaar.test", "/watch", ("watch", None)),
    ("bazaar.test", "/checkout", ("checkout", None)),
    ("bazaar.test", "/p/1/ask", None),
])
def test_form_endpoints(host, path, expected):
    assert GRAMMARS[host].form(path) == expected


# --- catalog facts -----------------------------------------------------------------------


def test_profiles_hold_both_sites_catalog_facts(sites):
    shop, bazaar = sites["shop.test"], sites["bazaar.test"]
    assert (shop.host, bazaar.host) == ("shop.test", "bazaar.test")
    assert shop.categories["kettles"] == "Kettles"
    assert shop.facets["kosher-kitchen"] == Facet("kosher-kitchen", "Kosher kitchen (Sabbath mode)", "need",
                                                  "kosher-kitchen")
    assert (bazaar.facets["used"].kind, bazaar.facets["used"].concept) == ("condition", "used")
    assert all(f.concept is None for f in shop.facets.values() if f.kind in ("price", "rating"))
    assert not set(shop.products) & set(bazaar.products)


def test_product_features_and_concepts_come_from_its_facets(sites):
    shop = sites["shop.test"]
    kosher = [p for p in shop.products.values() if "kosher-kitchen" in p.concepts]
    assert any(p.category == "kettles" for p in kosher) and any(p.sponsored for p in kosher)
    for p in shop.products.values():
        assert set(p.features) <= set(p.concepts)
        assert all(shop.facets[f].kind == "feature" for f in p.features)
        assert p.condition in p.concepts
        assert all(shop.facets[c].concept == c for c in p.concepts)


def test_sections_list_the_products_that_carry_their_concept(sites):
    for site in sites.values():
        for slug, section in site.sections.items():
            assert section.kind in ("theme", "department", "deals")
            assert all(pid in site.products for pid in section.products)
            if section.concept:
                assert all(section.concept in site.products[pid].concepts for pid in section.products)
            if section.category:
                assert section.category in site.categories
    assert sites["shop.test"].sections["kosher-kitchen"].concept == "kosher-kitchen"


# --- the export --------------------------------------------------------------------------


def test_export_shape(knowledge):
    assert list(knowledge) == ["format", "version", "catalog", "sites"]
    assert (knowledge["format"], knowledge["version"]) == ("spillage-knowledge", 1)
    assert (knowledge["catalog"]["seed"], len(knowledge["catalog"]["scenarios"])) == (0, 180)
    assert list(knowledge["sites"]) == ["shop.test", "bazaar.test"]
    for site in knowledge["sites"].values():
        assert list(site) == ["urls", "categories", "facets", "sections", "products"]
        product = next(iter(site["products"].values()))
        assert list(product) == ["title", "category", "brand", "price_cents", "condition", "features",
                                 "concepts", "sponsored"]
        assert list(next(iter(site["facets"].values()))) == ["label", "kind", "concept"]
        assert list(next(iter(site["sections"].values()))) == ["title", "kind", "concept", "category", "products"]


def test_export_round_trips_through_json(knowledge, sites):
    text = json.dumps(knowledge)
    assert json.loads(text) == json.loads(json.dumps(json.loads(text)))
    assert profiles(json.loads(text)) == sites


def test_other_json_is_refused():
    with pytest.raises(ValueError, match="spillage-knowledge"):
        profiles({"sites": {}})


def test_default_profiles_are_the_benchmark_catalog_with_seed_0(sites):
    assert site_profiles() == sites


# --- the command -------------------------------------------------------------------------


def test_command_writes_the_export_and_a_summary(tmp_path, knowledge, capsys):
    out, export = tmp_path / "catalog.sqlite", tmp_path / "knowledge.json"
    assert main(["origins", "catalog", "--out", str(out), "--export", str(export)]) == 0
    assert json.loads(export.read_text()) == json.loads(json.dumps(knowledge))
    assert knowledge_json(out) == knowledge
    summary, wrote = capsys.readouterr().err.splitlines()
    assert re.fullmatch(r"spillage: catalog seed 0 from 180 scenarios: shop\.test \d+ products, bazaar\.test \d+ "
                        r"products; \d+ sections, \d+ facets; built in [\d.]+ s into .*catalog\.sqlite", summary)
    assert wrote == f"spillage: wrote site knowledge to {export}"


def export(capsys, *args: str) -> str:
    """The JSON `spillage origins catalog ARGS` prints."""
    assert main(["origins", "catalog", *args]) == 0
    return capsys.readouterr().out


def test_same_seed_same_export_other_seed_other_export(capsys):
    small = ["--scenarios", *map(str, SMALL)]
    first, again, other = (export(capsys, *small, "--seed", seed) for seed in ("5", "5", "6"))
    assert first == again
    assert first != other
    assert json.loads(first)["catalog"]["scenarios"] == sorted(
        f"{name}-{style}" for name in ("bazaar-film-camera", "shop-kettle") for style in ("chat", "email", "generic"))
    assert json.loads(other)["catalog"]["seed"] == 6


def test_broken_scenario_file_is_one_line_and_exit_2(tmp_path, capsys):
    broken = tmp_path / "broken.yaml"
    broken.write_text(KETTLE_FILE.read_text().replace("site: shop.test", "site: shop.example"))
    target = tmp_path / "knowledge.json"
    assert main(["origins", "catalog", "--scenarios", str(broken), "--export", str(target)]) == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        f"spillage: {broken}:2: site: 'shop.example' is not one of shop.test, bazaar.test"]
    assert captured.out == "" and not target.exists()


# --- a session's catalog -----------------------------------------------------------------


def test_a_session_catalog_is_the_benchmark_plus_a_scenario_of_its_own():
    kettle = load_scenario(KETTLE_FILE, "email")
    assert catalog_scenarios(kettle) == (None, False)   # the benchmark's catalog, found without reading it ...
    assert with_benchmark([kettle]) == load_benchmark()  # ... which is the benchmark with it in its place
    edited = dataclasses.replace(kettle, task="pour-over kettle")
    scenarios, added = catalog_scenarios(edited)
    assert added and len(scenarios) == 178
    assert [s for s in scenarios if s.persona == kettle.persona] == [edited]
