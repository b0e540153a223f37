"""The catalogs of shop.test and bazaar.test: one SQLite file, searched with FTS5.

`build_catalog` writes it from the scenarios (origins/generate.py makes the rows); `Catalog`
answers the sites' read-only queries, one connection per thread.
"""

import json
import math
import os
import re
import sqlite3
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from .generate import CatalogData
from .generate import generate

SCHEMA_VERSION = 2
MAX_QUERY_TOKENS = 32
SORTS = ("relevance", "price-asc", "price-desc", "rating", "newest")
OR_KINDS = ("brand", "condition", "price", "rating")  # facets of one of these kinds combine with OR

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE categories (site TEXT NOT NULL, slug TEXT NOT NULL, label TEXT NOT NULL, position INTEGER NOT NULL,
    PRIMARY KEY (site, slug));
CREATE TABLE products (
    id INTEGER PRIMARY KEY, site TEXT NOT NULL, category TEXT NOT NULL, title TEXT NOT NULL,
    brand TEXT NOT NULL, price_cents INTEGER NOT NULL, list_price_cents INTEGER NOT NULL,
    rating REAL NOT NULL, rating_count INTEGER NOT NULL, condition TEXT NOT NULL,
    description TEXT NOT NULL, bullets TEXT NOT NULL, sponsored INTEGER NOT NULL,
    seller TEXT NOT NULL, seller_location TEXT NOT NULL, seller_feedback REAL NOT NULL,
    accepts_offers INTEGER NOT NULL, role TEXT NOT NULL);
CREATE INDEX products_site_category ON products (site, category);
CREATE TABLE facets (site TEXT NOT NULL, slug TEXT NOT NULL, label TEXT NOT NULL, kind TEXT NOT NULL,
    concept TEXT, position INTEGER NOT NULL, PRIMARY KEY (site, slug));
CREATE TABLE product_facets (product_id INTEGER NOT NULL REFERENCES products(id), facet_slug TEXT NOT NULL,
    position INTEGER NOT NULL, PRIMARY KEY (product_id, facet_slug));
CREATE INDEX product_facets_slug ON product_facets (facet_slug);
CREATE TABLE variants (product_id INTEGER NOT NULL, position INTEGER NOT NULL, name TEXT NOT NULL,
    value TEXT NOT NULL, price_delta_cents INTEGER NOT NULL, PRIMARY KEY (product_id, position));
CREATE TABLE reviews (id INTEGER PRIMARY KEY, product_id INTEGER NOT NULL, author TEXT NOT NULL,
    stars INTEGER NOT NULL, title TEXT NOT NULL, body TEXT NOT NULL, date TEXT NOT NULL);
CREATE INDEX reviews_product ON reviews (product_id);
CREATE TABLE questions (product_id INTEGER NOT NULL, position INTEGER NOT NULL, question TEXT NOT NULL,
    answer TEXT NOT NULL, PRIMARY KEY (product_id, position));
CREATE TABLE together (product_id INTEGER NOT NULL, position INTEGER NOT NULL, other_id INTEGER NOT NULL,
    PRIMARY KEY (product_id, position));
CREATE TABLE sections (site TEXT NOT NULL, slug TEXT NOT NULL, title TEXT NOT NULL, kind TEXT NOT NULL,
    concept TEXT, category TEXT, position INTEGER NOT NULL, PRIMARY KEY (site, slug));
CREATE TABLE section_products (site TEXT NOT NULL, section TEXT NOT NULL, product_id INTEGER NOT NULL,
    position INTEGER NOT NULL, PRIMARY KEY (site, section, product_id));
CREATE INDEX section_products_product ON section_products (product_id);
CREATE TABLE suggestions (site TEXT NOT NULL, text TEXT NOT NULL, weight INTEGER NOT NULL,
    PRIMARY KEY (site, text));
CREATE VIRTUAL TABLE products_fts USING fts5(
    title, brand, category, facets, description, seller, tokenize = 'porter unicode61 remove_diacritics 2');
"""


@dataclass(frozen=True)
class Facet:
    """A filter value: a feature, a need or lifestyle, a brand, a condition, a price or rating band."""

    slug: str
    label: str
    kind: str
    concept: str | None = None  # the scenario concept it is, if any


@dataclass(frozen=True)
class Product:
    """One catalog entry; `facets` holds facet slugs, features and concepts first."""

    id: int
    site: str
    category: str
    title: str
    brand: str
    price_cents: int
    list_price_cents: int
    rating: float
    rating_count: int
    condition: str
    description: str
    bullets: tuple[str, ...]
    sponsored: bool
    seller: str
    seller_location: str
    seller_feedback: float
    accepts_offers: bool
    facets: tuple[str, ...]


@dataclass(frozen=True)
class Category:
    """A department of one site, with how many products it holds."""

    slug: str
    label: str
    count: int


@dataclass(frozen=True)
class Section:
    """A themed collection, a department's best sellers or the deals carousel."""

    slug: str
    title: str
    kind: str  # theme, department, deals
    concept: str | None
    category: str | None
    product_ids: tuple[int, ...]


@dataclass(frozen=True)
class Variant:
    """One version of a product ("Color: Red") and what it adds to the price."""

    name: str
    value: str
    price_delta_cents: int


@dataclass(frozen=True)
class Review:
    id: int
    author: str
    stars: int
    title: str
    body: str
    date: str


@dataclass(frozen=True)
class SearchResult:
    """One page of results, with counts over all matches for the sidebar."""

    products: list[Product]
    total: int
    page: int
    pages: int
    facet_counts: list[tuple[Facet, int]]
    category_counts: list[tuple[Category, int]]
    matched_ids: tuple[int, ...]  # every match in ranked order, for related sections


STOPWORDS = frozenset(
    "a an and are as at be by for from i in is it me my of on or our the to with".split()
)


def tokenize(text: str) -> list[str]:
    """Distinct lowercase words of `text` (letters and digits, any script) that are not stopwords,
    at most MAX_QUERY_TOKENS."""
    words = (w for w in re.findall(r"[^\W_]+", text.lower()) if w not in STOPWORDS)
    return list(dict.fromkeys(words))[:MAX_QUERY_TOKENS]


def fts_query(text: str) -> str:
    """An FTS5 expression matching any word of `text` (each quoted, so no word is an operator)."""
    return " OR ".join(f'"{t}"' for t in tokenize(text))


def load_benchmark():
    """The benchmark's scenarios and the vocabulary (the default input of `build_catalog`)."""
    from spillage.scenarios.files import BENCHMARK_DIRS
    from spillage.scenarios.loader import load_file
    from spillage.scenarios.files import scenario_files

    return [s for f in scenario_files(BENCHMARK_DIRS) for s in load_file(f)]


def with_benchmark(extra) -> list:
    """The benchmark's scenarios with the `extra` ones that are not among them in place of their
    personas' benchmark scenarios (so an edited copy of a benchmark persona wins)."""
    benchmark = load_benchmark()
    new = [s for s in extra if s not in benchmark]
    replaced = {s.persona for s in new}
    return [s for s in benchmark if s.persona not in replaced] + new


def build_catalog(path, scenarios=None, seed: int = 0) -> CatalogData:
    """Write the catalog for `scenarios` (default: the benchmark's) to `path`, replacing it atomically."""
    from spillage.scenarios.vocabulary import load_vocabulary

    data = generate(load_benchmark() if scenarios is None else list(scenarios), load_vocabulary(), seed)
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=".catalog-", suffix=".sqlite", dir=path.parent)
    os.close(fd)
    try:
        conn = sqlite3.connect(tmp)
        with conn:
            conn.executescript(_SCHEMA)
            _write(conn, data)
        conn.close()
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return data


def _write(conn: sqlite3.Connection, data: CatalogData) -> None:
    conn.executemany("INSERT INTO meta VALUES (?, ?)", [
        ("schema", str(SCHEMA_VERSION)), ("seed", str(data.seed)), ("scenarios", json.dumps(data.scenarios)),
    ])
    conn.executemany("INSERT INTO categories VALUES (?, ?, ?, ?)",
                     [(site, slug, label, i) for i, ((site, slug), label) in enumerate(data.categories.items())])
    conn.executemany("INSERT INTO facets VALUES (?, ?, ?, ?, ?, ?)",
                     [(f.site, f.slug, f.label, f.kind, f.concept, i) for i, f in enumerate(data.facets.values())])
    facet_labels = {key: f.label for key, f in data.facets.items()}
    for p in data.products:
        conn.execute("INSERT INTO products VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", (
            p.id, p.site, p.category, p.title, p.brand, p.price_cents, p.list_price_cents, p.rating,
            p.rating_count, p.condition, p.description, json.dumps(p.bullets), int(p.sponsored), p.seller,
            p.seller_location, p.seller_feedback, int(p.accepts_offers), p.role))
        conn.executemany("INSERT INTO product_facets VALUES (?, ?, ?)",
                         [(p.id, slug, i) for i, slug in enumerate(p.facets)])
        conn.executemany("INSERT INTO variants VALUES (?, ?, ?, ?, ?)",
                         [(p.id, i, *v) for i, v in enumerate(p.variants)])
        conn.executemany("INSERT INTO reviews (product_id, author, stars, title, body, date) VALUES (?,?,?,?,?,?)",
                         [(p.id, *r) for r in p.reviews])
        conn.executemany("INSERT INTO questions VALUES (?, ?, ?, ?)",
                         [(p.id, i, *qa) for i, qa in enumerate(p.questions)])
        conn.executemany("INSERT INTO together VALUES (?, ?, ?)", [(p.id, i, o) for i, o in enumerate(p.together)])
        words = " ".join(facet_labels[(p.site, s)] for s in p.facets if not s.startswith(("price-", "rating-")))
        conn.execute("INSERT INTO products_fts (rowid, title, brand, category, facets, description, seller) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?)",
                     (p.id, p.title, p.brand, data.categories[(p.site, p.category)], words, p.description,
                      p.seller))
    for i, s in enumerate(data.sections):
        conn.execute("INSERT INTO sections VALUES (?, ?, ?, ?, ?, ?, ?)",
                     (s.site, s.slug, s.title, s.kind, s.concept, s.category, i))
        conn.executemany("INSERT INTO section_products VALUES (?, ?, ?, ?)",
                         [(s.site, s.slug, pid, j) for j, pid in enumerate(s.products)])
    conn.executemany("INSERT INTO suggestions VALUES (?, ?, ?)", data.suggestions)


class Catalog:
    """Read-only queries over a catalog file; one SQLite connection per thread."""

    def __init__(self, path):
        self.path = Path(path).resolve()
        if not self.path.is_file():
            raise FileNotFoundError(f"catalog not found: {self.path}")
        self._local = threading.local()
        self._sections: dict[str, list[Section]] = {}
        self._categories: dict[str, list[Category]] = {}
        self._facets: dict[str, dict[str, Facet]] = {}
        for site, slug, label, kind, concept in self._db().execute(
                "SELECT site, slug, label, kind, concept FROM facets ORDER BY position"):
            self._facets.setdefault(site, {})[slug] = Facet(slug, label, kind, concept)

    def _db(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(f"{self.path.as_uri()}?mode=ro", uri=True)
            self._local.conn = conn
        return conn

    def meta(self) -> dict:
        """Schema version, seed and the ids of the scenarios the catalog was built from."""
        rows = dict(self._db().execute("SELECT key, value FROM meta"))
        return {"schema": int(rows["schema"]), "seed": int(rows["seed"]), "scenarios": json.loads(rows["scenarios"])}

    def facets(self, site: str) -> list[Facet]:
        """The site's facets in catalog order."""
        return list(self._facets.get(site, {}).values())

    def facet(self, site: str, slug: str) -> Facet | None:
        return self._facets.get(site, {}).get(slug)

    def categories(self, site: str) -> list[Category]:
        """The site's departments in catalog order, with their product counts."""
        if site not in self._categories:
            rows = self._db().execute(
                "SELECT c.slug, c.label, COUNT(p.id) FROM categories c LEFT JOIN products p"
                " ON p.site = c.site AND p.category = c.slug WHERE c.site = ? GROUP BY c.slug ORDER BY c.position",
                (site,))
            self._categories[site] = [Category(*row) for row in rows]
        return list(self._categories[site])

    def category(self, site: str, slug: str) -> Category | None:
        return next((c for c in self.categories(site) if c.slug == slug), None)

    def product(self, site: str, product_id: int) -> Product | None:
        """The product with this id on `site`, else None."""
        found = self.products_by_id(site, [product_id])
        return found[0] if found else None

    def products_by_id(self, site: str, ids) -> list[Product]:
        """The products of `site` among `ids`, in the order given (unknown ids skipped)."""
        ids = [int(i) for i in ids]
        if not ids:
            return []
        rows = self._db().execute("SELECT * FROM products WHERE site = ? AND id IN (SELECT value FROM json_each(?))",
                                  (site, json.dumps(ids)))
        found = {p.id: p for p in self._with_facets(rows.fetchall())}
        return [found[i] for i in ids if i in found]

    def products(self, site: str) -> list[Product]:
        """All products of `site`, by id."""
        rows = self._db().execute("SELECT * FROM products WHERE site = ? ORDER BY id", (site,))
        return self._with_facets(rows.fetchall())

    def search(self, site: str, query: str = "", facets=(), category: str | None = None,
               sort: str = "relevance", page: int = 1, per_page: int = 24) -> SearchResult:
        """Products of `site` matching any word of `query` (all products when it has none), in
        `category`, carrying the facets given (OR within brand, condition, price and rating; AND
        otherwise); ranked by `sort`; page `page` of `per_page`.

        Unknown facet slugs match nothing; raises ValueError for an unknown sort or a page below 1."""
        if sort not in SORTS:
            raise ValueError(f"sort must be one of {', '.join(SORTS)}")
        if page < 1 or per_page < 1:
            raise ValueError("page and per_page start at 1")
        groups = self._facet_groups(site, facets)
        ids = self._match(site, query, category, sort, groups) if groups is not None else []
        pages = max(1, math.ceil(len(ids) / per_page))
        shown = self.products_by_id(site, ids[(page - 1) * per_page: page * per_page])
        matched = json.dumps(ids)
        counts = dict(self._db().execute(
            "SELECT facet_slug, COUNT(*) FROM product_facets"
            " WHERE product_id IN (SELECT value FROM json_each(?)) GROUP BY facet_slug", (matched,)))
        facet_counts = [(f, counts[f.slug]) for f in self.facets(site) if f.slug in counts]
        by_category = dict(self._db().execute(
            "SELECT category, COUNT(*) FROM products WHERE id IN (SELECT value FROM json_each(?))"
            " GROUP BY category", (matched,)))
        category_counts = [(c, by_category[c.slug]) for c in self.categories(site) if c.slug in by_category]
        return SearchResult(shown, len(ids), page, pages, facet_counts, category_counts, tuple(ids))

    def _facet_groups(self, site: str, facets) -> list[list[str]] | None:
        """The chosen facets as groups a product must each meet (None if a slug is unknown)."""
        groups: dict[str, list[str]] = {}
        for slug in dict.fromkeys(facets):
            facet = self.facet(site, slug)
            if facet is None:
                return None
            groups.setdefault(facet.kind if facet.kind in OR_KINDS else slug, []).append(slug)
        return list(groups.values())

    def _match(self, site: str, query: str, category: str | None, sort: str, groups: list[list[str]]) -> list[int]:
        """Ids of the matching products in ranked order."""
        order = {"relevance": "rank, p.id", "price-asc": "p.price_cents, p.id", "price-desc": "p.price_cents DESC, p.id",
                 "rating": "p.rating DESC, p.rating_count DESC, p.id", "newest": "p.id DESC"}[sort]
        sql = "SELECT p.id FROM products p"
        where = ["p.site = ?", "(? IS NULL OR p.category = ?)"]
        args: list = [site, category, category]
        expression = fts_query(query)
        if expression:
            sql += " JOIN products_fts ON products_fts.rowid = p.id"
            where.append("products_fts MATCH ?")
            args.append(expression)
            order = order.replace("rank", "bm25(products_fts, 10.0, 4.0, 6.0, 3.0, 1.0, 2.0)")
        else:
            order = order.replace("rank, ", "")
        for group in groups:
            where.append("EXISTS (SELECT 1 FROM product_facets pf WHERE pf.product_id = p.id"
                         " AND pf.facet_slug IN (SELECT value FROM json_each(?)))")
            args.append(json.dumps(group))
        rows = self._db().execute(f"{sql} WHERE {' AND '.join(where)} ORDER BY {order}", args)
        return [row[0] for row in rows]

    def _with_facets(self, rows) -> list[Product]:
        links: dict[int, list[str]] = {}
        for pid, slug in self._db().execute(
                "SELECT product_id, facet_slug FROM product_facets WHERE product_id IN (SELECT value FROM json_each(?))"
                " ORDER BY product_id, position", (json.dumps([row[0] for row in rows]),)):
            links.setdefault(pid, []).append(slug)
        products = []
        for row in rows:
            values = list(row[:-1])  # drop role: how a product came to be is not the site's business
            values[11] = tuple(json.loads(values[11]))
            values[12] = bool(values[12])
            values[16] = bool(values[16])
            products.append(Product(*values, facets=tuple(links.get(row[0], ()))))
        return products

    def sections(self, site: str, kind: str | None = None) -> list[Section]:
        """The site's sections (of one kind when given), in catalog order."""
        if site not in self._sections:  # read once: the catalog file never changes while served
            rows = self._db().execute("SELECT slug, title, kind, concept, category FROM sections WHERE site = ?"
                                      " ORDER BY position", (site,)).fetchall()
            members: dict[str, list[int]] = {}
            for section, pid in self._db().execute(
                    "SELECT section, product_id FROM section_products WHERE site = ? ORDER BY section, position",
                    (site,)):
                members.setdefault(section, []).append(pid)
            self._sections[site] = [Section(*row, product_ids=tuple(members.get(row[0], ()))) for row in rows]
        return [s for s in self._sections[site] if kind is None or s.kind == kind]

    def section(self, site: str, slug: str) -> Section | None:
        return next((s for s in self.sections(site) if s.slug == slug), None)

    def related_sections(self, site: str, product_ids, limit: int = 4) -> list[Section]:
        """Themed sections sharing the most products with `product_ids` (ties in catalog order)."""
        wanted = set(product_ids)
        scored = [(len(wanted & set(s.product_ids)), i, s) for i, s in enumerate(self.sections(site, "theme"))]
        return [s for n, _, s in sorted(scored, key=lambda t: (-t[0], t[1])) if n][:limit]

    def sponsored(self, site: str, product_ids, limit: int = 2) -> list[Product]:
        """The first `limit` sponsored products among `product_ids`, in their order."""
        ids = [int(i) for i in product_ids]
        marked = {row[0] for row in self._db().execute(
            "SELECT id FROM products WHERE site = ? AND sponsored = 1 AND id IN (SELECT value FROM json_each(?))",
            (site, json.dumps(ids)))}
        return self.products_by_id(site, [i for i in ids if i in marked][:limit])

    def suggest(self, site: str, prefix: str, limit: int = 8) -> list[str]:
        """Suggestions whose text or one of its words starts with `prefix` (case-insensitive)."""
        prefix = re.sub(r"\s+", " ", prefix.lower()).strip()
        if not prefix:
            return []
        like = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows = self._db().execute(
            "SELECT text FROM suggestions WHERE site = ? AND (text LIKE ? ESCAPE '\\' OR text LIKE ? ESCAPE '\\')"
            " ORDER BY (text LIKE ? ESCAPE '\\') DESC, weight DESC, text LIMIT ?",
            (site, like + "%", "% " + like + "%", like + "%", limit))
        return [row[0] for row in rows]

    def variants(self, product_id: int) -> list[Variant]:
        rows = self._db().execute("SELECT name, value, price_delta_cents FROM variants WHERE product_id = ?"
                                  " ORDER BY position", (product_id,))
        return [Variant(*row) for row in rows]

    def reviews(self, product_id: int, keyword: str = "") -> list[Review]:
        """Reviews of a product, newest first; with `keyword`, those whose title or text contains it."""
        like = "%" + keyword.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = self._db().execute(
            "SELECT id, author, stars, title, body, date FROM reviews WHERE product_id = ?"
            " AND (title LIKE ? ESCAPE '\\' OR body LIKE ? ESCAPE '\\') ORDER BY date DESC, id",
            (product_id, like, like))
        return [Review(*row) for row in rows]

    def questions(self, product_id: int) -> list[tuple[str, str]]:
        rows = self._db().execute("SELECT question, answer FROM questions WHERE product_id = ? ORDER BY position",
                                  (product_id,))
        return [tuple(row) for row in rows]

    def bought_together(self, site: str, product_id: int) -> list[Product]:
        ids = [row[0] for row in self._db().execute(
            "SELECT other_id FROM together WHERE product_id = ? ORDER BY position", (product_id,))]
        return self.products_by_id(site, ids)
