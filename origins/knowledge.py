"""What each site knows about itself, for the auditor: its URL grammar and its catalog's facts.

`knowledge_json` exports both from a catalog file (the format is in docs/KNOWLEDGE.md);
`profiles` reads such an export back as one `SiteProfile` per host, adding a grammar-only
profile for every other site with a profile file (amazon.com, ebay.com, a user's own).
"""

import functools
import tempfile
from dataclasses import asdict
from dataclasses import dataclass
from dataclasses import replace
from pathlib import Path

from .catalog import Catalog
from .catalog import Facet
from .catalog import build_catalog
from .grammar import Grammar
from .grammar import load_grammars

CATALOG_SITES = ("shop.test", "bazaar.test")  # the sites our catalog holds facts for
GRAMMARS = load_grammars()  # the shipped site profiles (spillage/origins/profiles/*.yaml), by host

FORMAT = "spillage-knowledge"
VERSION = 1


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
    facets: dict[str, Facet]     # the catalog's own record
    sections: dict[str, SectionFacts]
    products: dict[int, ProductFacts]


def knowledge_json(catalog_path) -> dict:
    """Both sites' grammar and catalog facts as a JSON-ready dict (docs/KNOWLEDGE.md)."""
    catalog = Catalog(catalog_path)
    return {"format": FORMAT, "version": VERSION, "catalog": catalog.meta(),
            "sites": {host: _site_json(catalog, host) for host in CATALOG_SITES}}


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
    """The profiles by host of a `knowledge_json` export (also after a trip through JSON), and a
    grammar-only profile for every other site with a shipped profile file."""
    if (knowledge.get("format"), knowledge.get("version")) != (FORMAT, VERSION):
        raise ValueError(f"not a {FORMAT} version {VERSION} export")
    found = {host: _profile(host, site) for host, site in knowledge["sites"].items()}
    return {**found, **{host: grammar_profile(host, g) for host, g in GRAMMARS.items() if host not in found}}


def grammar_profile(host: str, grammar: Grammar) -> SiteProfile:
    """The profile of a site we know only by its URL grammar (no catalog: no facets, sections, products)."""
    return SiteProfile(host=host, grammar=grammar, categories=dict(grammar.category_labels),
                       facets={}, sections={}, products={})


def _profile(host: str, site: dict) -> SiteProfile:
    urls = {k: tuple(v) if isinstance(v, list) else v for k, v in site["urls"].items()}
    return SiteProfile(
        host=host,
        grammar=Grammar(**urls),
        categories=dict(site["categories"]),
        facets={slug: Facet(slug, **f) for slug, f in site["facets"].items()},
        sections={slug: SectionFacts(**{**s, "products": tuple(s["products"])})
                  for slug, s in site["sections"].items()},
        products={int(pid): ProductFacts(id=int(pid), **{**p, "features": tuple(p["features"]),
                                                         "concepts": tuple(p["concepts"])})
                  for pid, p in site["products"].items()},
    )


@functools.cache
def _benchmark_knowledge() -> dict:
    with tempfile.TemporaryDirectory(prefix="spillage-knowledge-") as tmp:
        path = Path(tmp) / "sites.sqlite"
        build_catalog(path)
        return knowledge_json(path)


_BY_CATALOG: dict[str, dict[str, SiteProfile]] = {}   # content hash → profiles, the last few catalogs read


def _catalog_profiles(catalog_path, sha256: str) -> dict[str, SiteProfile]:
    if sha256 not in _BY_CATALOG:
        if len(_BY_CATALOG) >= 8:
            del _BY_CATALOG[next(iter(_BY_CATALOG))]
        _BY_CATALOG[sha256] = profiles(knowledge_json(catalog_path))
    return _BY_CATALOG[sha256]


def site_profiles(catalog_path=None, profile_dirs=(), benchmark: bool = True,
                  sha256: str | None = None) -> dict[str, SiteProfile]:
    """Profiles by host, from `catalog_path` (read once per process for a catalog whose content hash
    `sha256` is given: a batch of sessions on one catalog reads it once), else from the benchmark's
    catalog (seed 0, built once per process) when `benchmark`, else from the URL grammars alone (no
    catalog facts), with the sites of the profile files in `profile_dirs` added (one for a site
    already known replaces its grammar, keeping its catalog facts). ProfileError for a bad profile
    file."""
    if catalog_path is not None:
        found = dict(_catalog_profiles(catalog_path, sha256)) if sha256 else profiles(knowledge_json(catalog_path))
    else:
        found = profiles(_benchmark_knowledge() if benchmark else {"format": FORMAT, "version": VERSION, "sites": {}})
    for host, grammar in load_grammars(profile_dirs, shipped=False).items():
        known = found.get(host)
        found[host] = grammar_profile(host, grammar) if known is None else replace(
            known, grammar=grammar, categories={**grammar.category_labels, **known.categories})
    return found


def profile_for(sites: dict[str, SiteProfile], host: str) -> SiteProfile | None:
    """The profile of the site at `host`: by its name, else the first whose host patterns match."""
    host = host.lower()
    return sites.get(host) or next((p for p in sites.values() if p.grammar.answers(host)), None)
