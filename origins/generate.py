"""Generate the catalogs of shop.test and bazaar.test from the scenarios, deterministically per seed.

For every (site, category) the scenarios use, a department gets: for each scenario, products that
satisfy its `success` and near misses that fail one condition; for each irrelevant attribute's
concept, bait products that carry it (one of them sponsored); distractors up to a minimum size;
and a few out-of-department accessories. Themed sections collect each concept's products. All text
comes from origins/words.yaml. Each department draws from its own random stream, so adding a
scenario elsewhere changes no other department's text (only product ids).
"""

import math
import random
import re
from dataclasses import dataclass
from dataclasses import field
from datetime import date
from datetime import timedelta
from importlib import resources

import yaml

from spillage.scenarios.model import CONDITIONS
from spillage.scenarios.model import SITES
from spillage.scenarios.model import attribute_concepts
from spillage.scenarios.model import Scenario
from spillage.scenarios.vocabulary import Vocabulary

MIN_PER_CATEGORY = 24
WINNERS_PER_SCENARIO = 4
BAITS_PER_CONCEPT = 2
ACCESSORIES_PER_CATEGORY = 3
FIRST_ID = {"shop.test": 10001, "bazaar.test": 304000000001}
ACCESSORY_CATEGORY = {"shop.test": ("accessories", "Accessories"),
                      "bazaar.test": ("parts-accessories", "Parts & Accessories")}
PRICE_BANDS = ((0, 25), (25, 50), (50, 100), (100, 200), (200, 500), (500, None))
RATING_BANDS = (4, 3)
REVIEW_DATE = date(2026, 10, 1)
CONCEPT_KINDS = ("need", "brand")  # concept kinds that become themed sections


def words() -> dict:
    """The word lists and templates of origins/words.yaml."""
    return yaml.safe_load(resources.files(__package__).joinpath("words.yaml").read_text("utf-8"))


@dataclass
class FacetRow:
    site: str
    slug: str
    label: str
    kind: str            # feature, need, brand, condition, price, rating
    concept: str | None  # the scenario concept this facet is, if any


@dataclass
class ProductRow:
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
    bullets: list[str]
    sponsored: bool
    seller: str
    seller_location: str
    seller_feedback: float
    accepts_offers: bool
    facets: list[str]               # facet slugs, features and concepts first
    role: str                       # winner, near-miss, bait, distractor, accessory
    department: str = ""            # the department it was written for (accessories live elsewhere)
    id: int = 0
    variants: list[tuple[str, str, int]] = field(default_factory=list)   # name, value, price delta
    reviews: list[tuple[str, int, str, str, str]] = field(default_factory=list)  # author, stars, title, body, date
    questions: list[tuple[str, str]] = field(default_factory=list)
    together: list[int] = field(default_factory=list)  # indexes resolved to ids after numbering


@dataclass
class SectionRow:
    site: str
    slug: str
    title: str
    kind: str                # theme, department, deals
    concept: str | None
    category: str | None
    products: list[int]


@dataclass
class CatalogData:
    """Everything a catalog database holds, before it is written."""

    seed: int
    scenarios: list[str]
    categories: dict[tuple[str, str], str]       # (site, slug) → label
    facets: dict[tuple[str, str], FacetRow]      # (site, slug) → facet
    products: list[ProductRow]
    sections: list[SectionRow]
    suggestions: list[tuple[str, str, int]]      # site, text, weight


@dataclass
class Department:
    """What one category of one site must offer: the scenarios that shop there and their concepts."""

    site: str
    category: str
    label: str
    noun: str
    scenarios: list[Scenario] = field(default_factory=list)
    features: list[str] = field(default_factory=list)
    baits: list[tuple[str, Scenario]] = field(default_factory=list)  # (concept, its scenario)


def slugify(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def category_of(scenario: Scenario) -> str:
    """The scenario's success category, or one named after its task (imported scenarios)."""
    return scenario.success.category or slugify(scenario.task)


class Labels:
    """Labels and kinds of categories and concepts: the vocabulary's, else derived from the slug."""

    def __init__(self, vocabulary: Vocabulary, scenarios: list[Scenario]):
        self.vocabulary = vocabulary
        self.derived: dict[str, str] = {}
        for s in scenarios:
            for a in s.attributes:
                if not a.concepts:
                    self.derived[attribute_concepts(a)[0]] = (a.match[0] if a.match else a.text).strip()
            self.derived.setdefault(category_of(s), s.task.strip().capitalize())

    def label(self, slug: str) -> str:
        if self.vocabulary.knows(slug):
            return self.vocabulary.label(slug)
        return self.derived.get(slug) or slug.replace("-", " ").capitalize()

    def kind(self, slug: str) -> str:
        if slug in self.vocabulary.categories:
            return "category"
        term = self.vocabulary.concepts.get(slug)
        return term.kind if term else "need"


def plan_departments(scenarios: list[Scenario], labels: Labels, nouns: dict) -> list[Department]:
    """One department per (site, category) the scenarios shop in, in a stable order."""
    departments: dict[tuple[str, str], Department] = {}
    for s in sorted(scenarios, key=lambda s: s.id):
        category = category_of(s)
        key = (s.site, category)
        if key not in departments:
            label = labels.label(category)
            noun = (nouns.get(f"{s.site}/{category}") or nouns.get(category)
                    or re.sub(r"s$", "", label.split("&")[0].strip().lower()))
            departments[key] = Department(s.site, category, label, noun)
        d = departments[key]
        if any(other.persona == s.persona for other in d.scenarios):
            continue  # the styles of one persona share their attributes
        d.scenarios.append(s)
        for f in task_features(s, labels):
            if f not in d.features:
                d.features.append(f)
        for a in s.irrelevant:
            for concept in attribute_concepts(a):
                if labels.kind(concept) != "category" and concept not in [c for c, _ in d.baits]:
                    d.baits.append((concept, s))
    return [departments[k] for k in sorted(departments)]


def task_features(scenario: Scenario, labels: Labels) -> list[str]:
    """The product features the task asks for: success features, then relevant feature concepts."""
    features = list(scenario.success.features)
    for a in scenario.relevant:
        for c in a.concepts:
            if labels.kind(c) == "feature" and c not in features:
                features.append(c)
    return features


def lower_first(label: str) -> str:
    """`label` for use inside a sentence: "Gooseneck spout" → "gooseneck spout", "SLR" stays."""
    if len(label) > 1 and label[0].isupper() and not label[1].isupper():
        return label[0].lower() + label[1:]
    return label


def price_band(cents: int) -> tuple[str, str]:
    for low, high in PRICE_BANDS:
        if high is None or cents < high * 100:
            if high is None:
                return f"price-{low}-up", f"${low} & above"
            if low == 0:
                return f"price-0-{high}", f"Under ${high}"
            return f"price-{low}-{high}", f"${low} to ${high}"
    raise AssertionError("unreachable")


def _round_price(rng: random.Random, dollars: float) -> int:
    cents = max(199, int(dollars * 100))
    ending = rng.choice((99, 95, 0, 49))
    return max(99, (cents // 100) * 100 + ending - (100 if ending else 0))


class DepartmentWriter:
    """Writes the products of one department from its own random stream."""

    def __init__(self, d: Department, labels: Labels, w: dict, seed: int):
        self.d = d
        self.labels = labels
        self.w = w
        self.rng = random.Random(f"{seed}/{d.site}/{d.category}")
        budgets = [s.success.max_price for s in d.scenarios if s.success.max_price]
        self.base = sorted(budgets)[len(budgets) // 2] if budgets else 60.0
        self.products: list[ProductRow] = []
        self.noun = d.noun  # the noun of the products being written

    def write(self) -> list[ProductRow]:
        for s in self.d.scenarios:
            self.noun = self.w["persona_nouns"].get(s.persona, self.d.noun)
            self.winners(s)
            self.near_misses(s)
        for i, (concept, s) in enumerate(self.d.baits):
            self.noun = self.w["persona_nouns"].get(s.persona, self.d.noun)
            self.baits(i, concept, s)
        self.noun = self.d.noun
        while sum(p.category == self.d.category for p in self.products) < MIN_PER_CATEGORY:
            extra = self.rng.sample(self.d.features, k=min(len(self.d.features), self.rng.randint(0, 2)))
            self.add(extra, self.base * self.rng.uniform(0.3, 1.8), None, "distractor")
        for template in self.rng.sample(self.w["accessories"], ACCESSORIES_PER_CATEGORY):
            self.accessory(template)
        return self.products

    def winners(self, s: Scenario) -> None:
        for _ in range(WINNERS_PER_SCENARIO):
            others = [f for f in self.d.features if f not in s.success.features]
            extra = self.rng.sample(others, k=min(len(others), self.rng.randint(0, 2)))
            self.add([*s.success.features, *extra], self.budget_price(s), self.condition_for(s), "winner")

    def near_misses(self, s: Scenario) -> None:
        for missing in s.success.features[:3]:
            kept = [f for f in s.success.features if f != missing]
            self.add(kept, self.budget_price(s), self.condition_for(s), "near-miss")
        if s.success.max_price:
            over = s.success.max_price * self.rng.uniform(1.08, 1.6)
            self.add(list(s.success.features), over, self.condition_for(s), "near-miss")
        if self.d.site == "bazaar.test" and s.success.condition and "for-parts" not in s.success.condition:
            self.add(list(s.success.features), self.budget_price(s), "for-parts", "near-miss")

    def baits(self, index: int, concept: str, s: Scenario) -> None:
        """Products that carry `concept`; every other concept's first bait also satisfies `s`."""
        for n in range(BAITS_PER_CONCEPT):
            if n == 0 and index % 2 == 0:
                features, price, condition = list(s.success.features), self.budget_price(s), self.condition_for(s)
            else:
                features = self.rng.sample(self.d.features, k=min(len(self.d.features), self.rng.randint(0, 2)))
                price, condition = self.base * self.rng.uniform(0.4, 1.5), None
            self.add(features, price, condition, "bait", concept=concept, sponsored=n == 0)

    def budget_price(self, s: Scenario) -> float:
        if s.success.max_price:
            return s.success.max_price * self.rng.uniform(0.45, 0.95)
        return self.base * self.rng.uniform(0.5, 1.4)

    def condition_for(self, s: Scenario) -> str | None:
        return self.rng.choice(s.success.condition) if s.success.condition else None

    def default_condition(self) -> str:
        if self.d.site != "bazaar.test":
            return "new"
        return self.rng.choices(CONDITIONS, weights=(25, 15, 50, 10))[0]

    def add(self, features: list[str], dollars: float, condition: str | None, role: str,
            concept: str | None = None, sponsored: bool = False) -> None:
        rng, w, site = self.rng, self.w, self.d.site
        condition = condition or self.default_condition()
        concept_kind = self.labels.kind(concept) if concept else ""
        brand = self.labels.label(concept) if concept_kind == "brand" else rng.choice(w["brands"][site])
        price = _round_price(rng, dollars)
        feature_labels = [self.labels.label(f) for f in features]
        fill = {"brand": brand, "noun": self.noun, "adj": rng.choice(w["adjectives"]),
                "model": rng.choice(w["models"]), "opener": rng.choice(w["bazaar_openers"]),
                "features": ", ".join(feature_labels[:3]), "label": self.labels.label(concept or "")}
        kind = "bait" if concept and concept_kind != "brand" else "featured" if features else "plain"
        title = rng.choice(w["titles"][site][kind]).format(**fill)
        title = title[0].upper() + title[1:]
        text = [rng.choice(w["sentences"]["intro"]).format(**fill)]
        for label in feature_labels:
            text.append(rng.choice(w["sentences"]["feature"]).format(feature=label, feature_lower=lower_first(label)))
        if concept:
            text.append(rng.choice(w["sentences"]["concept"]).format(**fill))
        if site == "bazaar.test":
            text.append(rng.choice(w["sentences"]["condition"][condition]))
        text.append(rng.choice(w["sentences"]["closing"]))
        facets = [*features, *([concept] if concept else []), condition]
        if concept_kind != "brand":
            facets.append("brand-" + slugify(brand))
        rating = round(rng.triangular(2.6, 5.0, 4.4), 1)
        facets.append(price_band(price)[0])
        facets += [f"rating-{r}-up" for r in RATING_BANDS if rating >= r]
        discount = rng.random() < 0.3
        product = ProductRow(
            site=site, category=self.d.category, title=title, brand=brand, price_cents=price,
            list_price_cents=int(price * rng.uniform(1.15, 1.4)) if discount else price,
            rating=rating, rating_count=int(math.exp(rng.uniform(1.5, 8.5))),
            condition=condition, description=" ".join(text), bullets=feature_labels,
            sponsored=sponsored or rng.random() < 0.06, seller=rng.choice(w["sellers"]),
            seller_location=rng.choice(w["cities"]), seller_feedback=round(rng.uniform(96.5, 100.0), 1),
            accepts_offers=site == "bazaar.test" and rng.random() < 0.5,
            facets=list(dict.fromkeys(facets)), role=role, department=self.d.category,
        )
        self.details(product, feature_labels, fill)
        self.products.append(product)

    def accessory(self, template: str) -> None:
        rng, site = self.rng, self.d.site
        category, _ = ACCESSORY_CATEGORY[site]
        brand = rng.choice(self.w["brands"][site])
        title = f"{brand} " + template.format(noun=self.d.noun)
        price = _round_price(rng, rng.uniform(6, 40))
        product = ProductRow(
            site=site, category=category, title=title, brand=brand, price_cents=price, list_price_cents=price,
            rating=round(rng.uniform(3.0, 4.9), 1), rating_count=int(math.exp(rng.uniform(1, 6))),
            condition="new", description=f"An accessory for your {self.d.noun}, from {brand}. "
                                         + rng.choice(self.w["sentences"]["closing"]),
            bullets=[], sponsored=False, seller=rng.choice(self.w["sellers"]),
            seller_location=rng.choice(self.w["cities"]), seller_feedback=round(rng.uniform(96.5, 100.0), 1),
            accepts_offers=False, facets=["new", "brand-" + slugify(brand), price_band(price)[0]],
            role="accessory", department=self.d.category,
        )
        self.details(product, [], {"noun": self.d.noun, "label": self.d.label})
        self.products.append(product)

    def details(self, p: ProductRow, feature_labels: list[str], fill: dict) -> None:
        """Variants, reviews, answered questions and bought-together picks of one product."""
        rng, w = self.rng, self.w
        name = rng.choice(sorted(w["variants"]))
        values = rng.sample(w["variants"][name], k=min(len(w["variants"][name]), rng.randint(2, 3)))
        p.variants = [(name, v, 0 if i == 0 else rng.choice((0, 500, 1000))) for i, v in enumerate(values)]
        topics = feature_labels or [p.title.split(" ")[-1]]
        concept_label = fill.get("label") or self.d.label
        for _ in range(rng.randint(3, 5)):
            stars = max(1, min(5, round(rng.gauss(p.rating, 1.0))))
            feature = rng.choice(topics)
            detail = rng.choice(w["reviews"]["detail"]).format(feature_lower=lower_first(feature), label=concept_label)
            body = rng.choice(w["reviews"]["body"]).format(noun=self.noun, detail=detail)
            title = rng.choice(w["reviews"]["good" if stars >= 3 else "bad"])
            when = (REVIEW_DATE - timedelta(days=rng.randint(0, 700))).isoformat()
            p.reviews.append((rng.choice(w["reviewers"]), stars, title, body, when))
        for q, a in rng.sample(w["questions"], k=rng.randint(1, 2)):
            feature = lower_first(rng.choice(topics))
            p.questions.append((q.format(feature_lower=feature, noun=self.noun),
                                a.format(feature_lower=feature, noun=self.noun)))


def generate(scenarios: list[Scenario], vocabulary: Vocabulary, seed: int = 0) -> CatalogData:
    """The catalog data of both sites for `scenarios`: the same input and seed give the same data."""
    w = words()
    labels = Labels(vocabulary, scenarios)
    departments = plan_departments(scenarios, labels, w["nouns"])
    data = CatalogData(seed=seed, scenarios=sorted({s.id for s in scenarios}), categories={},
                       facets={}, products=[], sections=[], suggestions=[])
    for d in departments:
        data.categories[(d.site, d.category)] = d.label
        data.products += DepartmentWriter(d, labels, w, seed).write()
    for site in SITES:
        category, label = ACCESSORY_CATEGORY[site]
        if any(p.site == site and p.category == category for p in data.products):
            data.categories[(site, category)] = label
    _number(data)
    _facets(data, labels)
    _together(data, seed)
    _sections(data, departments, labels, w, seed)
    _suggestions(data, departments, labels)
    return data


def _number(data: CatalogData) -> None:
    order = {key: i for i, key in enumerate(data.categories)}
    data.products.sort(key=lambda p: (p.site, order[(p.site, p.category)]))  # stable within a department
    next_id = dict(FIRST_ID)
    for p in data.products:
        p.id = next_id[p.site]
        next_id[p.site] += 1


def _facets(data: CatalogData, labels: Labels) -> None:
    for p in data.products:
        for slug in p.facets:
            if (p.site, slug) in data.facets:
                continue
            if slug.startswith("brand-"):
                row = FacetRow(p.site, slug, p.brand, "brand", None)
            elif slug.startswith("price-"):
                row = FacetRow(p.site, slug, next(price_band(low * 100)[1] for low, _ in PRICE_BANDS
                                                  if price_band(low * 100)[0] == slug), "price", None)
            elif slug.startswith("rating-") and slug.endswith("-up"):
                row = FacetRow(p.site, slug, f"{slug.split('-')[1]} stars & up", "rating", None)
            elif slug in CONDITIONS:
                row = FacetRow(p.site, slug, labels.label(slug), "condition", slug)
            else:
                kind = labels.kind(slug)
                row = FacetRow(p.site, slug, labels.label(slug), kind if kind != "category" else "need", slug)
            data.facets[(p.site, slug)] = row


def _together(data: CatalogData, seed: int) -> None:
    """Frequently bought together: two from the same department and one accessory, chosen per product."""
    by_category: dict[tuple[str, str], list[int]] = {}
    accessories: dict[tuple[str, str], list[int]] = {}
    for p in data.products:
        by_category.setdefault((p.site, p.category), []).append(p.id)
        if p.role == "accessory":
            accessories.setdefault((p.site, p.department), []).append(p.id)
    for p in data.products:
        rng = random.Random(f"{seed}/together/{p.id}")
        same = [i for i in by_category[(p.site, p.category)] if i != p.id]
        accessory = accessories.get((p.site, p.department or p.category), [])
        p.together = rng.sample(same, k=min(2, len(same))) + (rng.sample(accessory, k=1) if accessory else [])


def _sections(data: CatalogData, departments: list[Department], labels: Labels, w: dict, seed: int) -> None:
    for site in SITES:
        products = [p for p in data.products if p.site == site]
        concepts = sorted({c for d in departments if d.site == site for c, _ in d.baits})
        for concept in concepts:
            rng = random.Random(f"{seed}/section/{site}/{concept}")
            title = rng.choice(w["sections"]["theme"]).format(label=labels.label(concept))
            members = [p.id for p in products if concept in p.facets]
            data.sections.append(SectionRow(site, concept, title, "theme", concept, None, members))
        for d in departments:
            if d.site != site:
                continue
            ranked = sorted((p for p in products if p.category == d.category),
                            key=lambda p: (-p.rating * math.log1p(p.rating_count), p.id))
            title = w["sections"]["department"][0].format(label=d.label)
            data.sections.append(SectionRow(site, f"best-{d.category}", title, "department", None,
                                            d.category, [p.id for p in ranked[:8]]))
        deals = sorted((p for p in products if p.list_price_cents > p.price_cents),
                       key=lambda p: (p.price_cents / p.list_price_cents, p.id))
        data.sections.append(SectionRow(site, "deals", "Today's deals", "deals", None, None,
                                        [p.id for p in deals[:12]]))


def _plain(label: str) -> str:
    return re.sub(r"\s*\([^)]*\)", "", label).strip().lower()


def _suggestions(data: CatalogData, departments: list[Department], labels: Labels) -> None:
    seen: set[tuple[str, str]] = set()

    def add(site: str, text: str, weight: int) -> None:
        text = re.sub(r"\s+", " ", text).strip()
        if text and (site, text) not in seen:
            seen.add((site, text))
            data.suggestions.append((site, text, weight))

    for d in departments:
        add(d.site, d.noun, 100)
        add(d.site, _plain(d.label), 90)
        for f in d.features:
            add(d.site, f"{_plain(labels.label(f))} {d.noun}", 60)
        for concept, _ in d.baits:
            add(d.site, f"{d.noun} {_plain(labels.label(concept))}", 40)
    nouns = {(d.site, d.category): d.noun for d in departments}
    for p in data.products:
        if p.role == "winner":
            add(p.site, f"{p.brand.lower()} {nouns[(p.site, p.category)]}", 10)
    data.suggestions.sort()
