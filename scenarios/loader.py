"""Load scenario YAML into `Scenario` objects, with errors that name file, line and field."""

from pathlib import Path

import yaml

from spillage.scenarios.model import SITES
from spillage.scenarios.model import STYLES
from spillage.scenarios.model import Attribute
from spillage.scenarios.model import Scenario
from spillage.scenarios.model import Success


class ScenarioError(ValueError):
    """A scenario file that cannot be used; str() is one line: `file:line: field: problem`."""

    def __init__(self, path: Path, line: int | None, where: str, problem: str):
        self.path, self.line, self.where, self.problem = path, line, where, problem
        place = f"{path}:{line}" if line else str(path)
        super().__init__(f"{place}: {where}: {problem}" if where else f"{place}: {problem}")


class _Fields:
    """A YAML mapping node with line numbers, read field by field."""

    def __init__(self, path: Path, node: yaml.Node, where: str):
        if not isinstance(node, yaml.MappingNode):
            raise ScenarioError(path, node.start_mark.line + 1, where, "expected a mapping")
        self.path, self.node, self.where = path, node, where
        self.items = {k.value: v for k, v in node.value}

    def _name(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def _missing(self, key: str) -> ScenarioError:
        return ScenarioError(self.path, self.node.start_mark.line + 1, self._name(key),
                             "required field is missing")

    def _bad(self, key: str, problem: str) -> ScenarioError:
        return ScenarioError(self.path, self.items[key].start_mark.line + 1, self._name(key), problem)

    def text(self, key: str, choices: tuple[str, ...] = (), default: str | None = None) -> str:
        if key not in self.items:
            if default is not None:
                return default
            raise self._missing(key)
        node = self.items[key]
        if not isinstance(node, yaml.ScalarNode) or not str(node.value).strip():
            raise self._bad(key, "expected non-empty text")
        if choices and node.value not in choices:
            raise self._bad(key, f"{node.value!r} is not one of {', '.join(choices)}")
        return node.value

    def flag(self, key: str) -> bool:
        value = self.text(key)
        if value not in ("true", "false"):
            raise self._bad(key, f"expected true or false, got {value!r}")
        return value == "true"

    def number(self, key: str) -> float | None:
        if key not in self.items:
            return None
        try:
            return float(self.text(key))
        except ValueError:
            raise self._bad(key, "expected a number") from None

    def texts(self, key: str) -> tuple[str, ...]:
        if key not in self.items:
            return ()
        node = self.items[key]
        if not isinstance(node, yaml.SequenceNode) or not all(
                isinstance(n, yaml.ScalarNode) and str(n.value).strip() for n in node.value):
            raise self._bad(key, "expected a list of non-empty texts")
        return tuple(n.value for n in node.value)

    def nodes(self, key: str) -> list[yaml.Node]:
        if key not in self.items:
            raise self._missing(key)
        node = self.items[key]
        if not isinstance(node, yaml.SequenceNode) or not node.value:
            raise self._bad(key, "expected a non-empty list")
        return node.value

    def mapping(self, key: str) -> "_Fields":
        if key not in self.items:
            raise self._missing(key)
        return _Fields(self.path, self.items[key], self._name(key))


def _attribute(path: Path, node: yaml.Node, where: str) -> Attribute:
    f = _Fields(path, node, where)
    return Attribute(
        id=f.text("id"), text=f.text("text"), relevant=f.flag("relevant"), cls=f.text("class"),
        match=f.texts("match"), cues=f.texts("cues"), concepts=f.texts("concepts"),
    )


def load_scenario(path: Path) -> Scenario:
    """Read and validate one scenario file; raises ScenarioError naming file, line and field."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ScenarioError(path, None, "", f"cannot read: {e}") from e
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problem = getattr(e, "problem", None) or str(e)
        raise ScenarioError(path, mark.line + 1 if mark else None, "", f"not valid YAML: {problem}") from e
    if root is None:
        raise ScenarioError(path, None, "", "file is empty")
    f = _Fields(path, root, "")
    attributes = tuple(
        _attribute(path, node, f"attributes[{i}]") for i, node in enumerate(f.nodes("attributes"))
    )
    s = f.mapping("success")
    return Scenario(
        id=f.text("id"), site=f.text("site", SITES), style=f.text("style", STYLES),
        task=f.text("task"), request=f.text("request"), prompt=f.text("prompt"),
        sanitized_prompt=f.text("sanitized_prompt"), attributes=attributes,
        success=Success(category=s.text("category"), facets_all=s.texts("facets_all"),
                        max_price=s.number("max_price")),
        source=str(path),
    )
