"""The generated catalog: deterministic, searchable, and covering every scenario's task and leaks."""

import sqlite3
from pathlib import Path

import pytest

from spillage.origins.catalog import Catalog
from spillage.origins.catalog import build_catalog
from spillage.origins.catalog import fts_query
from spillage.origins.catalog import load_benchmark
from spillage.origins.generate import MIN_PER_CATEGORY
from spillage.origins.generate import attribute_concepts
from spillage.origins.generate import category_of
from spillage.scenarios.importers.spillage_json import import_spillage_json
from spillage.scenarios.loader import load_file
from spillage.scenarios.model import Scenario

PAPER = Path(__file__).resolve().parents[2] / "shared" / "data" / "spillage" / "shopping_Amazon_chat.json"
MIN_WINNERS = 3


def satisfies(product, scenario: Scenario) -> bool:
    """Whether buying `product` completes the scenario's task, by catalog facts alone."""
    success = scenario.success
    return (product.category == category_of(scenario)
            and set(success.features) <= set(product.facets)
            and (success.max_price is None or product.price_cents <= round(success.max_price * 100))
            and (not success.condition or product.condition in success.condition))


def coverage_problems(catalog: Catalog, scenarios: list[Scenario]) -> list[str]:
    """Every way the catalog fails a scenario: too few products, no winners, a leak without surfaces."""
    problems = []
    products = {site: catalog.products(site) for site in {s.site for s in scenarios}}
    sections = {site: catalog.sections(site, "theme") for site in products}
    for s in scenarios:
        in_category = [p for p in products[s.site] if p.category == category_of(s)]
        if len(in_category) < MIN_PER_CATEGORY:
            problems.append(f"{s.id}: {len(in_category)} products in {category_of(s)}")
        if sum(satisfies(p, s) for p in in_category) < MIN_WINNERS:
            problems.append(f"{s.id}: fewer than {MIN_WINNERS} products satisfy success")
        for a in s.irrelevant:
            for concept in attribute_concepts(a):
                facet = catalog.facet(s.site, concept)
                label = facet.label if facet else concept
                carrying = [p for p in products[s.site] if concept in p.facets]
                named = [p for p in carrying if label.lower() in (p.title + " " + p.description).lower()]
                missing = [what for what, ok in (
                    ("a facet value", facet is not None and facet.concept == concept),
                    ("a bait product naming it", bool(named)),
                    ("a sponsored product", any(p.sponsored for p in carrying)),
                    ("a themed section", any(x.concept == concept and x.product_ids for x in sections[s.site])),
                ) if not ok]
                if missing:
                    problems.append(f"{s.id}: {a.id} ({concept}) lacks {', '.join(missing)}")
    return problems


@pytest.fixture(scope="module")
def benchmark():
    return load_benchmark()


def test_every_benchmark_scenario_is_satisfiable_and_every_leak_has_surfaces(catalog_file, benchmark):
    assert len(benchmark) == 180
    assert coverage_problems(Catalog(catalog_file), benchmark) == []


@pytest.mark.shared_data("data/spillage/shopping_Amazon_chat.json")
def test_scenarios_imported_from_the_paper_are_covered_too(tmp_path):
    import_spillage_json(PAPER, "shop.test", tmp_path / "imported")
    imported = [s for f in sorted((tmp_path / "imported").glob("*.yaml")) for s in load_file(f)]
    assert len(imported) == 30
    build_catalog(tmp_path / "catalog.sqlite", imported)
    assert coverage_problems(Catalog(tmp_path / "catalog.sqlite"), imported) == []


def test_the_same_seed_builds_the_same_database_and_another_seed_does_not(tmp_path, benchmark):
    shop = [s for s in benchmark if s.site == "shop.test"][:9]
    dumps = []
    for name, seed in (("a", 7), ("b", 7), ("c", 8)):
        build_catalog(tmp_path / f"{name}.sqlite", shop, seed)
        with sqlite3.connect(tmp_path / f"{name}.sqlite") as conn:
            dumps.append("\n".join(conn.iterdump()))
    assert dumps[0] == dumps[1]
    assert dumps[0] != dumps[2]


def test_a_department_does_not_change_when_other_scenarios_are_added(tmp_path, benchmark):
    kettle = [s for s in benchmark if s.persona == "shop-kettle"]
    build_catalog(tmp_path / "alone.sqlite", kettle)
    build_catalog(tmp_path / "all.sqlite", benchmark)
    titles = [[p.title for p in Catalog(tmp_path / f"{name}.sqlite").search("shop.test", category="kettles").products]
              for name in ("alone", "all")]
    assert titles[0] == titles[1]


def test_catalog_records_its_seed_and_scenarios(catalog_file, benchmark):
    meta = Catalog(catalog_file).meta()
    assert meta["seed"] == 0
    assert meta["scenarios"] == sorted(s.id for s in benchmark)


def test_both_sites_have_departments_accessories_and_sections(catalog_file):
    catalog = Catalog(catalog_file)
    for site, accessories in (("shop.test", "accessories"), ("bazaar.test", "parts-accessories")):
        categories = {c.slug: c for c in catalog.categories(site)}
        assert len(categories) >= 30 and accessories in categories
        kinds = {s.kind for s in catalog.sections(site)}
        assert kinds == {"theme", "department", "deals"}
    assert {p.condition for p in catalog.products("bazaar.test")} == {"new", "used", "refurbished", "for-parts"}
    assert {p.condition for p in catalog.products("shop.test")} == {"new"}


def test_product_text_varies(catalog_file):
    titles = [p.title for p in Catalog(catalog_file).products("shop.test")]
    assert len(set(titles)) > 0.95 * len(titles)
    descriptions = {p.description.split(".")[0] for p in Catalog(catalog_file).products("shop.test")}
    assert len(descriptions) > 50


def test_search_ranks_task_products_first(catalog_file):
    catalog = Catalog(catalog_file)
    result = catalog.search("shop.test", "gooseneck kettle variable temperature cordless")
    assert all(p.category == "kettles" for p in result.products[:10])
    assert {"gooseneck", "variable-temperature"} <= set(result.products[0].facets)


def test_search_is_scoped_to_its_site(catalog_file):
    catalog = Catalog(catalog_file)
    assert all(p.site == "bazaar.test" for p in catalog.search("bazaar.test", "kettle camera").products)
    assert catalog.product("bazaar.test", catalog.products("shop.test")[0].id) is None


def test_facets_combine_with_and_across_features_and_or_within_conditions(catalog_file):
    catalog = Catalog(catalog_file)
    both = catalog.search("shop.test", "", ["gooseneck", "cordless"], per_page=500).products
    assert both and all({"gooseneck", "cordless"} <= set(p.facets) for p in both)
    either = catalog.search("bazaar.test", "", ["used", "refurbished"], per_page=5000).products
    assert {p.condition for p in either} == {"used", "refurbished"}
    assert catalog.search("shop.test", "", ["no-such-facet"]).total == 0


def test_pages_and_sorts(catalog_file):
    catalog = Catalog(catalog_file)
    first = catalog.search("shop.test", "", category="kettles", sort="price-asc", per_page=10)
    second = catalog.search("shop.test", "", category="kettles", sort="price-asc", per_page=10, page=2)
    assert first.total == second.total >= MIN_PER_CATEGORY and first.pages == second.pages
    prices = [p.price_cents for p in first.products + second.products]
    assert prices == sorted(prices)
    with pytest.raises(ValueError):
        catalog.search("shop.test", "", sort="cheapest")


@pytest.mark.parametrize("query", [
    'kettle" OR "x', "NEAR(kettle camera)", "kettle*", "-kettle", "köttle ケトル 水壶", "a " * 4000, "", "   ",
    "AND OR NOT", "(", "\x00",
])
def test_any_query_text_is_safe(catalog_file, query):
    Catalog(catalog_file).search("shop.test", query)
    assert '"' not in fts_query(query).replace('" OR "', "").strip('"')


def test_suggestions_complete_prefixes_and_words(catalog_file):
    catalog = Catalog(catalog_file)
    assert catalog.suggest("shop.test", "gooseneck")[0].startswith("gooseneck")
    assert any("kettle" in s for s in catalog.suggest("shop.test", "kett"))
    assert catalog.suggest("shop.test", "%") == [] and catalog.suggest("shop.test", "") == []


def test_reviews_filter_by_keyword(catalog_file):
    catalog = Catalog(catalog_file)
    product = catalog.search("shop.test", "kettle").products[0]
    everything = catalog.reviews(product.id)
    assert 3 <= len(everything) <= 5
    word = everything[0].body.split()[-1].strip(".")
    assert all(word.lower() in (r.title + r.body).lower() for r in catalog.reviews(product.id, word))
    assert catalog.reviews(product.id, "zzzz-not-a-word") == []
