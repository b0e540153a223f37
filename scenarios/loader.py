"""Load scenario files (a persona in three styles, or a single scenario) with line numbers.

Structural problems (bad YAML, missing or mistyped fields) raise `ScenarioError` naming the
file, line and field; what the content means is judged by `spillage.scenarios.check`.
"""

from pathlib import Path

import yaml

from spillage.proxy.documents import DocumentError
from spillage.proxy.documents import compose_yaml
from spillage.scenarios.files import scenario_files
from spillage.scenarios.model import DERIVABLE
from spillage.scenarios.model import SITES
from spillage.scenarios.model import STYLES
from spillage.scenarios.model import Attribute
from spillage.scenarios.model import Scenario
from spillage.scenarios.model import Success

TOP_FIELDS = {"id", "persona", "site", "task", "request", "attributes", "success", "derived", "source",
              "styles", "style", "prompt", "sanitized_prompt"}
ATTRIBUTE_FIELDS = {"id", "text", "relevant", "class", "match", "cues", "concepts", "guessed", "look_alikes"}
SUCCESS_FIELDS = {"category", "features", "max_price", "condition"}
PROMPT_FIELDS = {"prompt", "sanitized_prompt"}


class ScenarioError(ValueError):
    """A scenario file that cannot be used; str() is one line: `file:line: field: problem`."""

    def __init__(self, path: Path, line: int | None, where: str, problem: str):
        self.path, self.line, self.where, self.problem = path, line, where, problem
        place = f"{path}:{line}" if line else str(path)
        super().__init__(f"{place}: {where}: {problem}" if where else f"{place}: {problem}")


class _Fields:
    """A YAML mapping node read field by field; records each field's line in `lines`."""

    def __init__(self, path: Path, node: yaml.Node, where: str, lines: dict, allowed: set[str]):
        if not isinstance(node, yaml.MappingNode):
            raise ScenarioError(path, node.start_mark.line + 1, where or "file", "expected a mapping")
        self.path, self.node, self.where, self.lines = path, node, where, lines
        self.items = {}
        for key, value in node.value:
            name = self._name(str(key.value))
            if key.value in self.items:
                raise ScenarioError(path, key.start_mark.line + 1, name, "field given twice")
            if key.value not in allowed:
                raise ScenarioError(path, key.start_mark.line + 1, name, "unknown field")
            self.items[key.value] = value
            lines[name] = key.start_mark.line + 1
        lines.setdefault(where, node.start_mark.line + 1)

    def _name(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def has(self, key: str) -> bool:
        return key in self.items

    def _missing(self, key: str) -> ScenarioError:
        return ScenarioError(self.path, self.node.start_mark.line + 1, self._name(key),
                             "required field is missing")

    def _bad(self, key: str, problem: str) -> ScenarioError:
        return ScenarioError(self.path, self.items[key].start_mark.line + 1, self._name(key), problem)

    def text(self, key: str, choices: tuple[str, ...] = (), default: str | None = None,
             allow_empty: bool = False) -> str:
        if key not in self.items:
            if default is not None:
                return default
            raise self._missing(key)
        node = self.items[key]
        if isinstance(node, yaml.ScalarNode) and node.style == "|":  # literal block: text starts a line below
            self.lines[f"{self._name(key)}#text"] = node.start_mark.line + 2
        if not isinstance(node, yaml.ScalarNode) or (not allow_empty and not str(node.value).strip()):
            raise self._bad(key, "expected non-empty text")
        if choices and node.value not in choices:
            raise self._bad(key, f"{node.value!r} is not one of {', '.join(choices)}")
        return node.value

    def flag(self, key: str, default: bool | None = None) -> bool:
        if key not in self.items and default is not None:
            return default
        value = self.text(key)
        if value not in ("true", "false"):
            raise self._bad(key, f"expected true or false, got {value!r}")
        return value == "true"

    def number(self, key: str) -> float | None:
        if key not in self.items:
            return None
        try:
            value = float(self.text(key))
        except ValueError:
            raise self._bad(key, "expected a number") from None
        if value <= 0:
            raise self._bad(key, "expected a positive number")
        return value

    def texts(self, key: str, choices: tuple[str, ...] = ()) -> tuple[str, ...]:
        if key not in self.items:
            return ()
        node = self.items[key]
        if not isinstance(node, yaml.SequenceNode) or not all(
                isinstance(n, yaml.ScalarNode) and str(n.value).strip() for n in node.value):
            raise self._bad(key, "expected a list of non-empty texts")
        values = tuple(n.value for n in node.value)
        for n in node.value:
            if choices and n.value not in choices:
                raise ScenarioError(self.path, n.start_mark.line + 1, self._name(key),
                                    f"{n.value!r} is not one of {', '.join(choices)}")
        return values

    def nodes(self, key: str) -> list[yaml.Node]:
        if key not in self.items:
            raise self._missing(key)
        node = self.items[key]
        if not isinstance(node, yaml.SequenceNode) or not node.value:
            raise self._bad(key, "expected a non-empty list")
        return node.value

    def mapping(self, key: str, allowed: set[str]) -> "_Fields":
        if key not in self.items:
            raise self._missing(key)
        return _Fields(self.path, self.items[key], self._name(key), self.lines, allowed)

    def plain(self, key: str):
        """The field as plain YAML data (for free-form metadata such as `source`)."""
        return yaml.safe_load(yaml.serialize(self.items[key])) if key in self.items else None


def _attribute(path: Path, node: yaml.Node, where: str, lines: dict) -> Attribute:
    f = _Fields(path, node, where, lines, ATTRIBUTE_FIELDS)
    return Attribute(
        id=f.text("id"), text=f.text("text"), relevant=f.flag("relevant"), cls=f.text("class"),
        match=f.texts("match"), cues=f.texts("cues"), concepts=f.texts("concepts"),
        guessed=f.flag("guessed", default=False), look_alikes=f.texts("look_alikes"),
    )


def _success(f: _Fields) -> Success:
    s = f.mapping("success", SUCCESS_FIELDS)
    return Success(category=s.text("category", allow_empty=True), features=s.texts("features"),
                   max_price=s.number("max_price"), condition=s.texts("condition"))


MAX_SCENARIO_BYTES = 1024 * 1024  # a persona file is a few KB; nothing bigger is read


def _compose(path: Path) -> yaml.Node:
    try:
        return compose_yaml(path, MAX_SCENARIO_BYTES, "scenario file")
    except DocumentError as e:
        raise ScenarioError(e.path, e.line, "", e.problem) from None


def load_file(path: Path) -> list[Scenario]:
    """Every scenario in one file: three for a persona file, one for a single-scenario file."""
    lines: dict[str, int] = {}
    f = _Fields(path, _compose(path), "", lines, TOP_FIELDS)
    attributes = tuple(_attribute(path, node, f"attributes[{i}]", lines)
                       for i, node in enumerate(f.nodes("attributes")))
    common = dict(
        site=f.text("site", SITES), task=f.text("task"), request=f.text("request"),
        attributes=attributes, success=_success(f), derived=frozenset(f.texts("derived", DERIVABLE)),
        source=f.plain("source"), file=str(path), lines=lines,
    )
    ident = f.text("id")
    if f.has("styles"):
        if any(f.has(k) for k in ("style", *PROMPT_FIELDS)):
            raise ScenarioError(path, lines["styles"], "styles",
                                "give either styles or style/prompt/sanitized_prompt, not both")
        styles = f.mapping("styles", set(STYLES))
        return [
            Scenario(id=f"{ident}-{style}", style=style, persona=ident,
                     prompt=prompts.text("prompt"), sanitized_prompt=prompts.text("sanitized_prompt"),
                     **common)
            for style in STYLES if styles.has(style)
            for prompts in [styles.mapping(style, PROMPT_FIELDS)]
        ]
    return [Scenario(id=ident, style=f.text("style", STYLES), persona=f.text("persona", default=ident),
                     prompt=f.text("prompt"), sanitized_prompt=f.text("sanitized_prompt"), **common)]


def load_scenario(path: Path, style: str | None = None) -> Scenario:
    """The one scenario a file holds, or from a persona file the one in `style`."""
    scenarios = load_file(path)
    if len(scenarios) == 1 and style in (None, scenarios[0].style):
        return scenarios[0]
    chosen = [s for s in scenarios if s.style == style]
    if not chosen:
        have = ", ".join(s.style for s in scenarios)
        raise ScenarioError(path, None, "styles", f"choose a style with --style ({have})"
                            if style is None else f"no {style!r} style here (have {have})")
    return chosen[0]


def find_scenario(scenario_id: str, paths: list[Path]) -> Scenario:
    """The scenario with this id among the files under `paths`."""
    for file in scenario_files(paths):
        for scenario in load_file(file):
            if scenario.id == scenario_id:
                return scenario
    raise ScenarioError(Path(scenario_id), None, "", "neither a file nor the id of a scenario in "
                        + ", ".join(str(p) for p in paths))


def resolve_scenario(spec: str, style: str | None = None) -> Scenario:
    """A scenario named by a file path (with `style` for a persona file) or by its id in the benchmark."""
    from spillage.scenarios.files import BENCHMARK_DIRS

    if Path(spec).exists():
        return load_scenario(Path(spec), style)
    return find_scenario(spec, BENCHMARK_DIRS)
