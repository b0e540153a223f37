"""The guard's policy: which attributes are sensitive, and what to do per observer (docs/GUARD.md).

    policy = load_policy(Path("my-guard.yaml"), mode="redact")     # PolicyError: file:line: key: problem
    policy = default_policy("block", scenario.irrelevant)
    policy = policy_for(args.guard, args.guard_policy, scenario.irrelevant)   # None when off

A policy file is YAML with two optional keys: `attributes`, a profile of one's own (id, match, cues,
concepts, look_alikes), used instead of the scenario's irrelevant attributes; and `observers`, the
rules for `first_party` and `third_party` that override the mode's defaults:

    content:     allow | redact | block   text a request carries (query, form, JSON, multipart, base64)
    behavior:    allow | block            a navigation or click that chooses what names or implies it
    beacons:     allow | redact | drop    tracker and site-log events carrying it (impressions: dropped)
    fields:      send | strip             field values and keystrokes in beacons, whatever they say
    opaque:      allow | block            values no decoding reads that look random (encrypted, packed)
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the policy file's reader (YAML, the scenario model) is imported only to read one
    import yaml

    from spillage.scenarios.model import Attribute

MODES = ("off", "monitor", "redact", "block")
OBSERVERS = ("first_party", "third_party")
CHOICES = {"content": ("allow", "redact", "block"), "behavior": ("allow", "block"),
           "beacons": ("allow", "redact", "drop"), "fields": ("send", "strip"), "opaque": ("allow", "block")}
ATTRIBUTE_KEYS = {"id", "match", "cues", "concepts", "look_alikes", "text"}
MAX_POLICY_BYTES = 1 << 20


class PolicyError(ValueError):
    """A policy file we cannot use: one line naming the file, line and key."""


@dataclass(frozen=True)
class Rules:
    """What to do with one observer's requests."""

    content: str = "redact"
    behavior: str = "block"
    beacons: str = "redact"
    fields: str = "send"
    opaque: str = "allow"


BLOCK = Rules(content="block", behavior="block", beacons="drop", fields="send")
# The rules of each mode, per observer: under `block` a third party gets no value that no decoding reads.
MODE_RULES = {"monitor": {o: Rules() for o in OBSERVERS}, "redact": {o: Rules() for o in OBSERVERS},
              "block": {"first_party": BLOCK, "third_party": replace(BLOCK, opaque="block")}}


@dataclass(frozen=True)
class Policy:
    """The mode (monitor only records), the sensitive attributes, and the rules per observer."""

    mode: str
    attributes: tuple[Attribute, ...]
    rules: dict[str, Rules] = field(default_factory=dict)
    source: str = "default"

    def for_observer(self, observer: str) -> Rules:
        return self.rules.get(observer) or MODE_RULES[self.mode][observer]

    @property
    def enforcing(self) -> bool:
        return self.mode in ("redact", "block")


def default_policy(mode: str, attributes) -> Policy:
    """The mode's rules for both observers, guarding `attributes` (a scenario's irrelevant ones)."""
    if mode not in MODE_RULES:
        raise PolicyError(f"guard mode {mode!r}: expected one of {', '.join(MODES)}")
    return Policy(mode, tuple(attributes), dict(MODE_RULES[mode]))


def policy_for(mode: str, policy_file: str | Path | None, attributes=()) -> Policy | None:
    """The policy that `--guard MODE` and `--guard-policy FILE` give, guarding `attributes` (a
    scenario's irrelevant ones) unless the file names its own; None when the guard is off.
    PolicyError (one line) for a file without a mode, a bad file, or nothing to guard."""
    if mode == "off":
        if policy_file:
            raise PolicyError("--guard-policy needs a guard mode: --guard monitor, redact or block")
        return None
    policy = load_policy(Path(policy_file), mode, attributes) if policy_file else default_policy(mode, attributes)
    if not policy.attributes:
        raise PolicyError("the guard has nothing to guard: give a scenario with irrelevant attributes, "
                          "or a --guard-policy that names some")
    return policy


def load_policy(path: Path, mode: str, scenario_attributes=()) -> Policy:
    """The policy in `path` for `mode`: its attributes, else `scenario_attributes`; its rules over the
    mode's. PolicyError (one line, file:line: key: problem) when the file is not one."""
    from spillage.proxy.documents import DocumentError
    from spillage.proxy.documents import load_yaml

    try:
        data, root = load_yaml(path, MAX_POLICY_BYTES, "guard policy")
    except DocumentError as e:
        raise PolicyError(str(e)) from None
    lines = line_numbers(root)
    where = Place(Path(path), lines)
    if not isinstance(data, dict):
        raise where.error("", "a mapping with `attributes` and/or `observers`")
    unknown = sorted(set(data) - {"attributes", "observers"})
    if unknown:
        raise where.error(unknown[0], "unknown key; expected attributes, observers")
    policy = default_policy(mode, scenario_attributes)
    own = tuple(read_attribute(where, f"attributes[{i}]", a) for i, a in enumerate(
        where.of_type(data, "attributes", list, [])))
    first = {}
    for i, attribute in enumerate(own):
        if first.setdefault(attribute.id, i) != i:
            raise where.error(f"attributes[{i}].id", f"{attribute.id!r} again (attributes[{first[attribute.id]}] "
                                                     "has it): each attribute needs its own id")
    attributes = own or policy.attributes
    if not attributes:
        raise where.error("attributes", "no attributes to guard: give some, or a scenario whose irrelevant ones to use")
    rules = dict(policy.rules)
    for observer, given in where.of_type(data, "observers", dict, {}).items():
        if observer not in OBSERVERS:
            raise where.error(f"observers.{observer}", f"unknown observer; expected {', '.join(OBSERVERS)}")
        if not isinstance(given, dict):
            raise where.error(f"observers.{observer}", "a mapping of content, behavior, beacons, fields")
        for key, value in given.items():
            if key not in CHOICES:
                raise where.error(f"observers.{observer}.{key}", f"unknown rule; expected {', '.join(CHOICES)}")
            if value not in CHOICES[key]:
                raise where.error(f"observers.{observer}.{key}", f"{value!r}: expected one of {', '.join(CHOICES[key])}")
        rules[observer] = replace(rules[observer], **given)
    return Policy(mode, attributes, rules, str(path))


@dataclass(frozen=True)
class Place:
    """Errors that name the policy file and the line of a key."""

    path: Path
    lines: dict[str, int]

    def error(self, key: str, problem: str) -> PolicyError:
        line = self.lines.get(key) or self.lines.get(key.split(".")[0].split("[")[0])
        return PolicyError(f"{self.path}{f':{line}' if line else ''}: {f'{key}: ' if key else ''}{problem}")

    def of_type(self, data: dict, key: str, kind: type, default):
        value = data.get(key, default)
        if value is None:
            return default
        if not isinstance(value, kind):
            raise self.error(key, f"expected a {'list' if kind is list else 'mapping'}")
        return value


def read_attribute(where: Place, key: str, data) -> Attribute:
    """One attribute of a policy's own profile."""
    from spillage.scenarios.model import Attribute

    if not isinstance(data, dict):
        raise where.error(key, "a mapping with id, match, cues, concepts")
    unknown = sorted(set(data) - ATTRIBUTE_KEYS)
    if unknown:
        raise where.error(f"{key}.{unknown[0]}", f"unknown key; expected {', '.join(sorted(ATTRIBUTE_KEYS))}")
    ident = data.get("id")
    if not isinstance(ident, str) or not ident.strip():
        raise where.error(f"{key}.id", "a non-empty text")
    lists = {}
    for name in ("match", "cues", "concepts", "look_alikes"):
        value = data.get(name) or []
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise where.error(f"{key}.{name}", "a list of non-empty texts")
        lists[name] = tuple(value)
    if not (lists["match"] or lists["cues"] or lists["concepts"]):
        raise where.error(key, f"attribute {ident!r} has no match, cues or concepts: nothing could find it")
    return Attribute(id=ident, text=str(data.get("text") or ident), relevant=False, cls="guarded", **lists)


def line_numbers(root: yaml.Node) -> dict[str, int]:
    """1-based lines of the keys of a YAML mapping tree: `observers.first_party.content`,
    `attributes[0].match`, …"""
    import yaml

    found: dict[str, int] = {}
    seen: set[int] = set()

    def walk(node: yaml.Node, prefix: str) -> None:
        if id(node) in seen:   # an alias: its node is walked once (a billion laughs is not a billion walks)
            return
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                name = f"{prefix}.{key.value}" if prefix else str(key.value)
                found.setdefault(name, key.start_mark.line + 1)
                walk(value, name)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                found.setdefault(f"{prefix}[{i}]", item.start_mark.line + 1)
                walk(item, f"{prefix}[{i}]")

    walk(root, "")
    return found
