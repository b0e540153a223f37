"""The shop's product catalog: a SQLite file with products, facets and their links."""

import os
import re
import sqlite3
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Facet:
    """A filter value shown in the sidebar: a feature, an audience or a price band."""

    slug: str
    label: str
    kind: str


@dataclass(frozen=True)
class Product:
    """One catalog entry; `facets` holds facet slugs in catalog facet order."""

    id: int
    slug: str
    title: str
    category: str
    price_cents: int
    description: str
    facets: tuple[str, ...]


SEED_FACETS = (
    ("variable-temperature", "Variable temperature", "feature"),
    ("gooseneck", "Gooseneck spout", "feature"),
    ("cordless", "Cordless", "feature"),
    ("kosher-kitchen", "Kosher kitchen (Sabbath mode)", "audience"),
    ("pregnancy-safe", "Pregnancy safe (BPA-free)", "audience"),
    ("under-40", "Under $40", "price"),
    ("for-seniors", "Easy grip for seniors", "audience"),
    ("travel", "Travel size", "feature"),
    ("glass", "Glass body", "feature"),
)

SEED_PRODUCTS = (
    (101, "Arden Gooseneck Pour-Over Kettle 1.0L", "kettles", 8900,
     "A slim gooseneck spout gives a steady, precise pour for pour-over coffee. "
     "Set any temperature from 40 to 100 °C, then lift the cordless body off its base.",
     ("variable-temperature", "gooseneck", "cordless")),
    (102, "Brisa Variable Temperature Kettle 1.7L", "kettles", 5900,
     "Five presets and a dial hold water at any temperature from 40 to 100 °C for green tea, "
     "oolong or coffee. The cordless jug lifts straight off its 360° base.",
     ("variable-temperature", "cordless")),
    (103, "Corvo Stovetop Gooseneck Kettle 0.9L", "kettles", 3500,
     "A stainless gooseneck kettle for gas, electric and induction hobs, with a narrow spout "
     "for slow, even pouring. A budget pick at under $40.",
     ("gooseneck", "under-40")),
    (104, "Dalton Glass Kettle 1.7L", "kettles", 3900,
     "A borosilicate glass body lets you watch the water boil, and no plastic touches the "
     "water, so it is BPA-free and pregnancy safe. Cordless, and under $40.",
     ("cordless", "glass", "pregnancy-safe", "under-40")),
    (105, "Elm Hot Water Urn 2.5L with Sabbath Mode", "kettles", 7900,
     "Keeps 2.5 litres hot all day, a countertop alternative to a kettle for large households. "
     "Its Sabbath mode holds a set temperature without button presses, for a kosher kitchen.",
     ("kosher-kitchen", "variable-temperature")),
    (106, "Fenn Gooseneck Kettle with Sabbath Mode 1.0L", "kettles", 11900,
     "A cordless gooseneck kettle that holds any temperature from 40 to 100 °C. "
     "Its Sabbath mode keeps water warm without pressing buttons, for kosher kitchens.",
     ("gooseneck", "variable-temperature", "cordless", "kosher-kitchen")),
    (107, "Gale Travel Kettle 0.5L", "kettles", 2500,
     "A compact, dual-voltage travel kettle that packs two cups inside it for trips. "
     "Cordless, and under $40.",
     ("travel", "cordless", "under-40")),
    (108, "Harlow Easy-Pour Kettle 1.5L", "kettles", 4900,
     "A light cordless kettle with a large soft-grip handle and a tilt-assist pour, "
     "an easy grip for seniors and for hands with less strength.",
     ("for-seniors", "cordless")),
    (109, "Iris BPA-free Stainless Kettle 1.7L", "kettles", 6900,
     "Stainless steel inside, with no plastic in contact with the water: BPA-free and "
     "pregnancy safe. Cordless, with variable temperature settings from 40 to 100 °C.",
     ("pregnancy-safe", "cordless", "variable-temperature")),
    (110, "Juno Electric Milk Frother", "coffee", 2900,
     "Whips hot or cold milk into foam for lattes in about 90 seconds. Under $40.",
     ("under-40",)),
    (111, "Kestrel Burr Coffee Grinder", "coffee", 9900,
     "Conical steel burrs with 30 grind settings, from espresso-fine to French-press coarse.",
     ()),
    (112, "Linden Pour-Over Coffee Set", "coffee", 4500,
     "A ceramic dripper, 40 paper filters and a small gooseneck pitcher for a slow, even pour.",
     ("gooseneck",)),
)

STOPWORDS = frozenset(
    "a an and are as at be by for from i in is it me my of on or our the to with".split()
)

_SCHEMA = """
CREATE TABLE products (
    id INTEGER PRIMARY KEY,
    slug TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL,
    category TEXT NOT NULL,
    price_cents INTEGER NOT NULL,
    description TEXT NOT NULL
);
CREATE TABLE facets (
    slug TEXT PRIMARY KEY,
    label TEXT NOT NULL,
    kind TEXT NOT NULL
);
CREATE TABLE product_facets (
    product_id INTEGER NOT NULL REFERENCES products(id),
    facet_slug TEXT NOT NULL REFERENCES facets(slug),
    PRIMARY KEY (product_id, facet_slug)
);
"""


def tokenize(text: str) -> list[str]:
    """Lowercase words split on non-alphanumerics, stopwords dropped, plural -s stripped."""
    words = re.findall(r"[^\W_]+", text.lower())
    return [_singular(w) for w in words if w not in STOPWORDS]


def _singular(word: str) -> str:
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _slugify(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def build_catalog(path) -> None:
    """Write the seed catalog to `path`, replacing any file there atomically."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=".catalog-", suffix=".sqlite", dir=path.parent)
    os.close(fd)
    try:
        conn = sqlite3.connect(tmp)
        with conn:
            conn.executescript(_SCHEMA)
            conn.executemany("INSERT INTO facets (slug, label, kind) VALUES (?, ?, ?)", SEED_FACETS)
            for pid, title, category, price, description, facets in SEED_PRODUCTS:
                conn.execute(
                    "INSERT INTO products VALUES (?, ?, ?, ?, ?, ?)",
                    (pid, _slugify(title), title, category, price, description),
                )
                conn.executemany(
                    "INSERT INTO product_facets VALUES (?, ?)", [(pid, f) for f in facets]
                )
        conn.close()
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


class Catalog:
    """Read-only queries over a catalog file; one SQLite connection per thread."""

    def __init__(self, path):
        self.path = Path(path).resolve()
        if not self.path.is_file():
            raise FileNotFoundError(f"catalog not found: {self.path}")
        self._local = threading.local()

    def _db(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(f"{self.path.as_uri()}?mode=ro", uri=True)
            self._local.conn = conn
        return conn

    def facets(self) -> list[Facet]:
        rows = self._db().execute("SELECT slug, label, kind FROM facets ORDER BY rowid")
        return [Facet(*row) for row in rows]

    def categories(self) -> list[str]:
        """Category names in order of their first product."""
        rows = self._db().execute("SELECT category FROM products GROUP BY category ORDER BY MIN(id)")
        return [row[0] for row in rows]

    def products(self) -> list[Product]:
        """All products, by id."""
        return self._select(None, [])

    def product(self, product_id: int) -> Product | None:
        rows = self._db().execute("SELECT * FROM products WHERE id = ?", (product_id,)).fetchall()
        return self._with_facets(rows)[0] if rows else None

    def search(self, query: str, facets: list[str], category: str | None = None) -> list[Product]:
        """Products carrying every facet given, ranked by distinct query tokens matched.

        A query without tokens matches everything (ordered by id)."""
        candidates = self._select(category, facets)
        wanted = set(tokenize(query))
        if not wanted:
            return candidates
        labels = {f.slug: f.label for f in self.facets()}
        scored = []
        for p in candidates:
            text = " ".join([p.title, p.description, *(labels[s] for s in p.facets)])
            score = len(wanted & set(tokenize(text)))
            if score:
                scored.append((-score, p.id, p))
        return [p for _, _, p in sorted(scored)]

    def facet_counts(self, products: list[Product]) -> list[tuple[Facet, int]]:
        """Facets present on `products` with how many carry each, in catalog facet order."""
        counts = {}
        for p in products:
            for slug in p.facets:
                counts[slug] = counts.get(slug, 0) + 1
        return [(f, counts[f.slug]) for f in self.facets() if f.slug in counts]

    def _select(self, category: str | None, facets: list[str]) -> list[Product]:
        wanted = sorted(set(facets))
        sql = "SELECT * FROM products p WHERE (? IS NULL OR p.category = ?)"
        args: list = [category, category]
        if wanted:
            marks = ", ".join("?" * len(wanted))
            sql += (
                " AND (SELECT COUNT(*) FROM product_facets pf"
                f" WHERE pf.product_id = p.id AND pf.facet_slug IN ({marks})) = ?"
            )
            args += [*wanted, len(wanted)]
        rows = self._db().execute(sql + " ORDER BY p.id", args).fetchall()
        return self._with_facets(rows)

    def _with_facets(self, rows) -> list[Product]:
        links = self._db().execute(
            "SELECT pf.product_id, pf.facet_slug FROM product_facets pf"
            " JOIN facets f ON f.slug = pf.facet_slug ORDER BY f.rowid"
        )
        by_product: dict[int, list[str]] = {}
        for pid, slug in links:
            by_product.setdefault(pid, []).append(slug)
        return [Product(*row, facets=tuple(by_product.get(row[0], ()))) for row in rows]
