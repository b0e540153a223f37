"""A site's specification: what makes shop.test or bazaar.test itself when the storefront
(origins/storefront.py) builds it. The data (paths, parameter names, limits, the words of its
refusals) is origins/sites/<site>.yaml; the code (templates, sorts, filters, lists, checkout
fields, a resource of its own) comes from the site's module, and `load_spec` joins the two.
"""

from dataclasses import dataclass
from dataclasses import field
from importlib import resources
from typing import NamedTuple

import yaml

from .common import esc


class Field(NamedTuple):
    """A free-text checkout field."""

    name: str
    label: str
    limit: int
    required: bool = False
    multiline: bool = False
    autocomplete: str = ""

    def html(self) -> str:
        """The labelled input, or textarea when multiline."""
        attrs = f'id="{self.name}" name="{self.name}" maxlength="{self.limit}"'
        auto = f' autocomplete="{self.autocomplete}"' if self.autocomplete else ""
        control = f"<textarea {attrs}></textarea>" if self.multiline else f'<input type="text" {attrs}{auto}>'
        return f'<div class="field"><label for="{self.name}">{esc(self.label)}</label>\n{control}</div>\n'


@dataclass(frozen=True)
class FilterParam:
    """A query parameter of a listing whose repeated values are facets."""

    name: str
    kinds: tuple[str, ...] = ()     # the facet kinds it takes; any when empty
    choices: tuple[str, ...] = ()   # fixed values, instead of the catalog's facets
    most: int = 0                   # at most this many at once; no limit when 0
    skip_empty: bool = False        # empty values are left out (else refused)
    refusal: str = "There is no filter {slug!r}."


@dataclass(frozen=True)
class Words:
    """What a site says when it refuses a request; `{…}` are filled in."""

    long_query: str
    bad_category: str            # {slug!r}
    bad_sort: str                # {choices}
    no_department: str           # {slug!r}
    no_product: str              # {id}
    bad_product_field: str
    empty_cart: str
    no_order: str                # {id!r}
    bad_list: str = ""           # {choices}
    one_version: str = ""        # a product without variants given one; "" → its one version is 0
    bad_subject: str = ""        # {choices}
    no_section: str = "There is no collection {slug!r}."


@dataclass(frozen=True)
class Paths:
    """A site's URLs."""

    search: str
    department: str              # + <category>
    section: str                 # + <slug>
    product: str                 # + <id>
    suggest: str
    lists: str
    list_add: str
    order: str                   # + <order id>
    product_digits: int | None = None   # a product id has exactly this many digits
    product_actions: tuple[str, ...] = ("ask",)   # POST <product>/<action>, Product.on_post_<action>
    cart: str = "/cart"
    cart_add: str = "/cart/add"
    cart_remove: str = "/cart/remove"
    checkout: str = "/checkout"


@dataclass(frozen=True)
class SiteSpec:
    """Everything that makes one site of the storefront what it is: the data in
    origins/sites/<site>.yaml (`load_spec`) and the code the site module gives it."""

    site: str
    template: str                # templates/<template>.html is its layout
    all_categories: str          # the search form's first category option
    all_selected: bool           # … marked selected when no category is chosen
    paths: Paths
    words: Words
    query_param: str             # a listing's search words, category, sort and page
    category_param: str
    sort_param: str
    page_param: str
    max_page: int
    max_id: int                  # the largest id a form may name (a path's ids are below it)
    query_limit: int
    query_in_bytes: bool         # query_limit counts UTF-8 bytes (else characters)
    query_on_departments: bool   # a category's page reads the search words too
    product_field: str           # the form field naming a product
    variant_param: str
    asked_anchor: str            # where the page goes after a question is sent
    list_param: str              # the form field naming a list ("" → the only one)
    remove_checks_product: bool  # /cart/remove refuses a product or variant the site has not
    # from the site's module
    pages: type                  # the site's templates: pages(front) renders each page
    per_page: int
    sorts: dict[str, str]        # sort key → label
    filters: tuple[FilterParam, ...]
    question: Field              # the ask form's text
    subjects: tuple[str, ...]    # the ask form's subjects (none when empty)
    lists: tuple[str, ...]       # the visitor's lists (the first when the form names none)
    checkout_fields: tuple[Field, ...]
    checkout_flags: tuple[str, ...] = ()   # checkboxes of the checkout form
    resources: dict = field(default_factory=dict)   # role → a resource class of the site's own


def load_spec(site: str, **code) -> SiteSpec:
    """The spec of `site`: origins/sites/<site>.yaml with what its module gives in `code`."""
    data = yaml.safe_load(resources.files(__package__).joinpath(f"sites/{site}.yaml").read_text("utf-8"))
    paths = {**data.pop("paths")}
    paths["product_actions"] = tuple(paths.get("product_actions", Paths.product_actions))
    return SiteSpec(site=site, paths=Paths(**paths), words=Words(**data.pop("words")), **data, **code)
