"""What each origin knows about its own site, exported for the auditor."""

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .catalog import Catalog, build_catalog


@dataclass(frozen=True)
class ProductFacts:
    id: int
    title: str
    category: str
    price_cents: int
    facets: tuple[str, ...]


@dataclass(frozen=True)
class SiteProfile:
    """URL conventions of a site (where queries, filters, products and cart adds are) plus its catalog."""

    host: str
    search_path: str
    query_params: tuple[str, ...]
    facet_param: str
    product_path: re.Pattern  # group 1 is the product id
    category_path: re.Pattern  # group 1 is the category name
    cart_add_path: str
    cart_product_field: str
    facets: dict[str, str]
    products: dict[int, ProductFacts]


def site_profiles(catalog_path=None) -> dict[str, SiteProfile]:
    """Profiles by host, read from `catalog_path` or from a freshly built seed catalog."""
    if catalog_path is not None:
        return {"shop.test": _shop_profile(Catalog(catalog_path))}
    with tempfile.TemporaryDirectory(prefix="spillage-knowledge-") as tmp:
        path = Path(tmp) / "catalog.sqlite"
        build_catalog(path)
        return {"shop.test": _shop_profile(Catalog(path))}


def _shop_profile(catalog: Catalog) -> SiteProfile:
    return SiteProfile(
        host="shop.test",
        search_path="/s",
        query_params=("k",),
        facet_param="f",
        product_path=re.compile(r"^/p/(\d+)$"),
        category_path=re.compile(r"^/c/([^/]+)$"),
        cart_add_path="/cart/add",
        cart_product_field="product_id",
        facets={f.slug: f.label for f in catalog.facets()},
        products={
            p.id: ProductFacts(p.id, p.title, p.category, p.price_cents, p.facets)
            for p in catalog.products()
        },
    )
