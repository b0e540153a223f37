"""Site profiles: where a site's URLs put what a visitor types and chooses, read from YAML files.

One file per site (docs/SITE_PROFILES.md has the format); the shipped ones are in
`spillage/origins/profiles/`. `load_grammars(dirs)` validates and reads them; a bad file is a
`ProfileError` naming the file, line and key.
"""

import dataclasses
import re
from dataclasses import dataclass
from dataclasses import field
from importlib.resources import files
from pathlib import Path
from urllib.parse import unquote

import yaml

from spillage.proxy.documents import DocumentError
from spillage.proxy.documents import compose_yaml

from .routes import form_int
from .routes import path_int

SHIPPED = Path(str(files(__package__) / "profiles"))
PAGE_LABELS = {"page_products": "product", "page_facets": "facet", "page_sections": "section"}   # key → what it labels
PATTERN_KEYS = ("category_path", "section_path", "product_path", "suggest_path", "cart_add_path",
                "facet_separator", "facet_value", "aspect_params")


class ProfileError(ValueError):
    """A profile file that cannot be used; str() is one line: `file:line: key: problem`."""

    def __init__(self, path: Path, line: int | None, key: str, problem: str):
        place = f"{path}:{line}" if line else str(path)
        super().__init__(f"{place}: {key}: {problem}" if key else f"{place}: {problem}")


@dataclass(frozen=True)
class Grammar:
    """Where a site puts what a visitor says and chooses. Path patterns match a whole path; their
    group `id` (else group 1) is the category, section or product they name."""

    search_paths: tuple[str, ...] = ()        # search result pages (patterns)
    query_params: tuple[str, ...] = ()        # the search text
    facet_params: tuple[str, ...] = ()        # facets, repeated or split by facet_separator
    category_param: str = ""                  # a category on a search page
    category_path: str = ""                   # a department page
    section_path: str = ""                    # a themed collection, best sellers, deals
    product_path: str = ""                    # a product page; group `title`, if any, is its title
    product_query_params: tuple[str, ...] = ()  # text searched on a product page (its reviews)
    suggest_path: str = ""
    suggest_param: str = ""
    cart_add_path: str = ""
    product_field: str = ""                   # the form field naming a product
    forms: dict[str, str] = field(default_factory=dict)  # other form endpoints: name → path pattern
    sort_param: str = ""                      # the sort order of a listing
    page_param: str = ""                      # the page number of a listing
    hosts: tuple[str, ...] = ()               # host name patterns the site also answers at
    aspect_params: str = ""                   # parameters that are facets by name: `name=value`
    facet_separator: str = ""                 # splits one facet value into several
    facet_value: str = ""                     # group 1 is the shown part of a facet the catalog does not know
    facet_labels: dict[str, str] = field(default_factory=dict)     # labels of known facet values
    category_labels: dict[str, str] = field(default_factory=dict)  # labels of known category values
    all_categories: tuple[str, ...] = ()      # category values that choose no category
    site_params: tuple[str, ...] = ()         # parameters the site's own links add (patterns): never text typed
    ids: str = ""                             # how the site reads product ids: `int`, `int(N)` (N digits), else as text
    page_products: tuple[str, ...] = ()       # patterns over the site's HTML pages: group `id` a product, `label` its title
    page_facets: tuple[str, ...] = ()         # … group `id` a facet value as a URL chooses it, `label` its name
    page_sections: tuple[str, ...] = ()       # … group `id` a section as its path names it, `label` its heading

    def product(self, text: str, in_form: bool = False) -> int | str | None:
        """A product id from a path (percent-decoded) or a form field, read as the site reads it: with
        `ids: int` by our routes' own rules (origins/routes.py), None when the site would refuse it;
        else the text as it is."""
        if not self.ids:
            return text
        if in_form:
            return form_int(text)
        digits = re.fullmatch(r"int(?:\((\d+)\))?", self.ids)
        return path_int(text, int(digits[1]) if digits and digits[1] else None)

    def form(self, path: str) -> tuple[str, str | None] | None:
        """(name, product id in the path or None) of a known form endpoint, else None."""
        for name, pattern in self.forms.items():
            if m := re.fullmatch(pattern, path):
                return name, m.group(1) if m.groups() else None
        return None

    def is_search(self, path: str) -> bool:
        return any(re.fullmatch(p, path) for p in self.search_paths)

    def facets(self, params: dict[str, list[str]]) -> list[str]:
        """The facets a listing's parameters choose: facet parameter values, split by the
        separator, and `name=value` for each parameter named like an aspect."""
        values = [part for name in self.facet_params for v in params.get(name, ()) for part in self.split(v)]
        if self.aspect_params:
            values += [f"{unquote(name)}={unquote(part)}" for name, vs in params.items()
                       if re.fullmatch(self.aspect_params, name) for v in vs for part in self.split(v) if part.strip()]
        return [v for v in values if v.strip()]

    def split(self, value: str) -> list[str]:
        return re.split(self.facet_separator, value) if self.facet_separator else [value]

    def facet_label(self, slug: str) -> str:
        """The label of a facet the catalog does not know: a known label, the facet_value part, or the slug."""
        if slug in self.facet_labels:
            return self.facet_labels[slug]
        m = re.fullmatch(self.facet_value, slug) if self.facet_value else None
        return m.group(1) if m else slug

    def reads(self, name: str) -> bool:
        """Whether a query parameter `name` is one this grammar reads, or one the site adds itself."""
        named = {*self.query_params, *self.facet_params, *self.product_query_params, self.category_param,
                 self.sort_param, self.page_param, self.suggest_param}
        return name in named or any(re.fullmatch(p, name) for p in self.site_params) or bool(
            self.aspect_params and re.fullmatch(self.aspect_params, name))

    def answers(self, host: str) -> bool:
        """Whether `host` (lower case) is one of the host patterns."""
        return any(re.fullmatch(p, host) for p in self.hosts)


def path_id(m: re.Match) -> str:
    """What a path pattern names: its group `id`, else group 1."""
    return m.group("id") if "id" in m.re.groupindex else m.group(1)


# --- reading profile files --------------------------------------------------------------------

FIELDS = {f.name: f for f in dataclasses.fields(Grammar)}
LISTS = {name for name, f in FIELDS.items() if f.type == tuple[str, ...]}
MAPS = {name for name, f in FIELDS.items() if f.type == dict[str, str]}


def load_grammars(dirs=(), shipped: bool = True) -> dict[str, Grammar]:
    """Grammars by site host: the shipped profiles (unless not `shipped`), then every `*.yaml` in
    `dirs` (a file for a site already loaded replaces it)."""
    grammars = {}
    for folder in ((SHIPPED,) if shipped else ()) + tuple(map(Path, dirs)):
        if not folder.is_dir():
            raise ProfileError(folder, None, "", "no such profile folder")
        for path in sorted(folder.glob("*.yaml")):
            site, grammar = load_profile(path)
            grammars[site] = grammar
    return grammars


MAX_PROFILE_BYTES = 1 << 20  # a profile is a few KB


def load_profile(path: Path) -> tuple[str, Grammar]:
    """(site host, grammar) of one profile file; ProfileError naming file, line and key when it is bad."""
    try:
        root = compose_yaml(path, MAX_PROFILE_BYTES, "site profile")
    except DocumentError as e:
        raise ProfileError(e.path, e.line, "", e.problem) from None
    if not isinstance(root, yaml.MappingNode):
        raise ProfileError(path, root.start_mark.line + 1 if root else None, "", "expected a mapping of keys")
    values, lines = {}, {}
    for key, node in root.value:
        name = str(key.value)
        lines[name] = key.start_mark.line + 1
        if name in values:
            raise ProfileError(path, lines[name], name, "given twice")
        if name != "site" and name not in FIELDS:
            raise ProfileError(path, lines[name], name, "unknown key (see docs/SITE_PROFILES.md)")
        values[name] = _value(path, name, node)
    site = values.pop("site", None)
    if not site:
        raise ProfileError(path, None, "site", "required key is missing")
    for name in PATTERN_KEYS:
        _compile(path, lines, name, values.get(name, ""))
    if values.get("ids") and not re.fullmatch(r"int(?:\(\d+\))?", values["ids"]):
        raise ProfileError(path, lines["ids"], "ids", f"{values['ids']!r}: expected int or int(N), or leave it out (text)")
    for name in ("search_paths", "hosts", "site_params"):
        for pattern in values.get(name, ()):
            _compile(path, lines, name, pattern)
    for name in PAGE_LABELS:
        for pattern in values.get(name, ()):
            if not {"id", "label"} <= set(_compile(path, lines, name, pattern).groupindex):
                raise ProfileError(path, lines[name], name, f"'{pattern}': needs the groups (?P<id>…) and (?P<label>…)")
    for name, pattern in values.get("forms", {}).items():
        _compile(path, lines, f"forms.{name}", pattern, lines.get("forms"))
    return site.lower(), Grammar(**values)


def _value(path: Path, name: str, node: yaml.Node):
    """The key's value, of the type its field holds."""
    line = node.start_mark.line + 1
    if name in LISTS:
        if not isinstance(node, yaml.SequenceNode) or not all(_is_text(n) for n in node.value):
            raise ProfileError(path, line, name, "expected a list of strings")
        return tuple(str(n.value) for n in node.value)
    if name in MAPS:
        if not isinstance(node, yaml.MappingNode) or not all(_is_text(k) and _is_text(v) for k, v in node.value):
            raise ProfileError(path, line, name, "expected a mapping of strings to strings")
        return {str(k.value): str(v.value) for k, v in node.value}
    if not _is_text(node):
        raise ProfileError(path, line, name, "expected a string")
    return str(node.value)


def _is_text(node: yaml.Node) -> bool:
    """A scalar that is not null (numbers are read as the text written, `0` stays "0")."""
    return isinstance(node, yaml.ScalarNode) and not (node.tag.endswith(":null") and node.value in ("", "~", "null"))


def _compile(path: Path, lines: dict, name: str, pattern: str, line: int | None = None) -> re.Pattern:
    try:
        return re.compile(pattern)
    except re.error as e:
        raise ProfileError(path, line or lines.get(name), name, f"bad pattern '{pattern}': {e}") from e
