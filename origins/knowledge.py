"""What each site knows about itself, for the auditor: its URL grammar and its catalog's facts.

`knowledge_json` exports both from a catalog file (the format is in docs/KNOWLEDGE.md);
`profiles` reads such an export back as one `SiteProfile` per host.
"""

import functools
import re
import tempfile
from dataclasses import asdict
from dataclasses import dataclass
from pathlib import Path

from .catalog import Catalog
from .catalog import build_catalog

FORMAT = "spillage-knowledge"
VERSION = 1


@dataclass(frozen=True)
class Grammar:
    """Where a site puts what a visitor says and chooses. Patterns match a whole path; group 1 is
    the category, section or product they name."""

    search_paths: tuple[str, ...]
    query_params: tuple[str, ...]        # the search text
    facet_params: tuple[str, ...]        # facet slugs, repeated
    category_param: str                  # a category slug on a search page
    category_path: str                   # a department page
    section_path: str                    # a themed collection, best sellers, deals
    product_path: str
    product_query_params: tuple[str, ...]  # text searched on a product page (its reviews)
    suggest_path: str
    suggest_param: str
    cart_add_path: str
    product_field: str                   # the form field naming a product
    forms: dict[str, str]                # other form endpoints: name → path pattern
    sort_param: str = ""                 # the sort order of a listing
    page_param: str = ""                 # the page number of a listing

    def form(self, path: str) -> tuple[str, str | None] | None:
        """(name, product id in the path or None) of a known form endpoint, else None."""
        for name, pattern in self.forms.items():
            if m := re.fullmatch(pattern, path):
                return name, m.group(1) if m.groups() else None
        return None


GRAMMARS = {
    "shop.test": Grammar(
        search_paths=("/s",), query_params=("k",), facet_params=("f",), category_param="i",
        category_path=r"/c/([^/]+)", section_path=r"/b/([^/]+)", product_path=r"/p/(\d+)",
        product_query_params=("review_kw",), suggest_path="/suggest", suggest_param="q",
        cart_add_path="/cart/add", product_field="product_id",
        forms={"ask": r"/p/(\d+)/ask", "cart-remove": "/cart/remove", "list-add": "/list/add",
               "checkout": "/checkout"}, sort_param="sort", page_param="page"),
    "bazaar.test": Grammar(
        search_paths=("/sch/",), query_params=("_nkw",), facet_params=("_aspect", "LH_ItemCondition"),
        category_param="_sacat", category_path=r"/b/([^/]+)", section_path=r"/e/([^/]+)",
        product_path=r"/itm/(\d+)", product_query_params=(), suggest_path="/autosug", suggest_param="q",
        cart_add_path="/cart/add", product_field="item_id",
        forms={"offer": r"/itm/(\d+)/offer", "ask": r"/itm/(\d+)/ask", "watch": "/watch",
               "cart-remove": "/cart/remove", "checkout": "/checkout"}, sort_param="_sop", page_param="_pgn"),
}


@dataclass(frozen=True)
class ProductFacts:
    id: int
    title: str
    category: str
    brand: str
    price_cents: int
    condition: str
    features: tuple[str, ...]   # facet slugs of kind feature
    concepts: tuple[str, ...]   # scenario concepts it carries (features, needs, brands, its condition)
    sponsored: bool


@dataclass(frozen=True)
class FacetFacts:
    label: str
    kind: str                   # feature, need, brand, condition, price, rating
    concept: str | None         # the scenario concept it is, if any


@dataclass(frozen=True)
class SectionFacts:
    title: str
    kind: str                   # theme, department, deals
    concept: str | None
    category: str | None
    products: tuple[int, ...]


@dataclass(frozen=True)
class SiteProfile:
    """One site: its URL grammar and the facts of its catalog, by slug or id."""

    host: str
    grammar: Grammar
    categories: dict[str, str]  # slug → label
    facets: dict[str, FacetFacts]
    sections: dict[str, SectionFacts]
    products: dict[int, ProductFacts]


def knowledge_json(catalog_path) -> dict:
    """Both sites' grammar and catalog facts as a JSON-ready dict (docs/KNOWLEDGE.md)."""
    catalog = Catalog(catalog_path)
    return {"format": FORMAT, "version": VERSION, "catalog": catalog.meta(),
            "sites": {host: _site_json(catalog, host) for host in GRAMMARS}}


def _site_json(catalog: Catalog, host: str) -> dict:
    facets = {f.slug: f for f in catalog.facets(host)}
    products = {}
    for p in catalog.products(host):
        carried = [facets[s] for s in p.facets if s in facets]
        products[str(p.id)] = {
            "title": p.title, "category": p.category, "brand": p.brand, "price_cents": p.price_cents,
            "condition": p.condition, "features": [f.slug for f in carried if f.kind == "feature"],
            "concepts": [f.concept for f in carried if f.concept], "sponsored": p.sponsored}
    return {
        "urls": asdict(GRAMMARS[host]),
        "categories": {c.slug: c.label for c in catalog.categories(host)},
        "facets": {f.slug: {"label": f.label, "kind": f.kind, "concept": f.concept} for f in facets.values()},
        "sections": {s.slug: {"title": s.title, "kind": s.kind, "concept": s.concept, "category": s.category,
                              "products": list(s.product_ids)} for s in catalog.sections(host)},
        "products": products,
    }


def profiles(knowledge: dict) -> dict[str, SiteProfile]:
    """The profiles by host of a `knowledge_json` export (also after a trip through JSON)."""
    if (knowledge.get("format"), knowledge.get("version")) != (FORMAT, VERSION):
        raise ValueError(f"not a {FORMAT} version {VERSION} export")
    return {host: _profile(host, site) for host, site in knowledge["sites"].items()}


def _profile(host: str, site: dict) -> SiteProfile:
    urls = {k: tuple(v) if isinstance(v, list) else v for k, v in site["urls"].items()}
    return SiteProfile(
        host=host,
        grammar=Grammar(**urls),
        categories=dict(site["categories"]),
        facets={slug: FacetFacts(**f) for slug, f in site["facets"].items()},
        sections={slug: SectionFacts(**{**s, "products": tuple(s["products"])})
                  for slug, s in site["sections"].items()},
        products={int(pid): ProductFacts(id=int(pid), **{**p, "features": tuple(p["features"]),
                                                         "concepts": tuple(p["concepts"])})
                  for pid, p in site["products"].items()},
    )


@functools.cache
def _benchmark_knowledge() -> dict:
    with tempfile.TemporaryDirectory(prefix="spillage-knowledge-") as tmp:
        path = Path(tmp) / "catalog.sqlite"
        build_catalog(path)
        return knowledge_json(path)


def site_profiles(catalog_path=None) -> dict[str, SiteProfile]:
    """Profiles by host, from `catalog_path` or from the benchmark's catalog (seed 0, built once per process)."""
    return profiles(knowledge_json(catalog_path) if catalog_path is not None else _benchmark_knowledge())
