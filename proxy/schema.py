"""The capture log's JSON Schema (capture.schema.json), compiled once into plain Python checks.

`jsonschema` takes over a millisecond a record, far too slow for `verify` on a long capture; this
compiles the keywords the schema uses (type, const, enum, required, properties, additionalProperties,
unevaluatedProperties, allOf with if/then, oneOf, $ref, pattern, minLength, minimum, maximum, items,
prefixItems, minItems) into closures. tests/test_schema.py checks it agrees with jsonschema on valid
and broken records of every kind. A keyword it does not know makes compiling fail, so the schema
cannot grow past what is checked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

SCHEMA_PATH = Path(__file__).with_name("capture.schema.json")
ANNOTATIONS = frozenset({"$schema", "$id", "title", "description", "$defs"})

#: A check returns None when the value is valid, else why not (with a JSON-pointer-like path).
Check = Callable[[Any, str], "str | None"]


class SchemaError(ValueError):
    """The schema uses a keyword this compiler does not implement."""


def _is_type(value: Any, name: str) -> bool:
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, {"string": str, "object": dict, "array": list, "boolean": bool,
                              "null": type(None)}[name])


class _Compiler:
    def __init__(self, root: dict) -> None:
        self.root = root
        self.refs: dict[str, Check] = {}

    def ref(self, pointer: str) -> Check:
        if pointer not in self.refs:
            self.refs[pointer] = lambda value, at: None  # placeholder for recursive references
            node = self.root
            for part in pointer.removeprefix("#/").split("/"):
                node = node[part]
            self.refs[pointer] = self.node(node)
        return lambda value, at: self.refs[pointer](value, at)

    def node(self, schema: Any) -> Check:
        """The check of one schema node (an object, or a boolean schema)."""
        if schema is True:
            return lambda value, at: None
        if schema is False:
            return lambda value, at: f"{at}: no value is allowed here"
        unknown = set(schema) - ANNOTATIONS - set(self.keywords(schema))
        if unknown:
            raise SchemaError(f"keyword(s) not supported: {', '.join(sorted(unknown))}")
        checks = [make(schema[key]) for key, make in self.keywords(schema).items() if key in schema]
        if "unevaluatedProperties" in schema:
            checks.append(self.unevaluated(schema))

        def check(value, at):
            for one in checks:
                if (problem := one(value, at)) is not None:
                    return problem
            return None
        return check

    def keywords(self, schema: dict) -> dict[str, Callable[[Any], Check]]:
        return {
            "type": self.type_, "const": self.const, "enum": self.enum, "pattern": self.pattern,
            "minLength": self.min_length, "minimum": self.minimum, "maximum": self.maximum,
            "required": self.required, "properties": self.properties,
            "additionalProperties": lambda s: self.additional(s, schema.get("properties", {})),
            "unevaluatedProperties": lambda s: lambda value, at: None,  # see unevaluated()
            "allOf": self.all_of, "oneOf": self.one_of, "$ref": self.ref, "if": lambda s: lambda v, a: None,
            "then": lambda s: lambda v, a: None, "items": lambda s: self.items(s, len(schema.get("prefixItems", []))),
            "prefixItems": self.prefix_items, "minItems": self.min_items,
        }

    @staticmethod
    def type_(name: str) -> Check:
        return lambda value, at: None if _is_type(value, name) else f"{at}: not of type {name}"

    @staticmethod
    def const(expected: Any) -> Check:
        return lambda value, at: None if value == expected and type(value) is type(expected) \
            else f"{at}: must be {json.dumps(expected)}"

    @staticmethod
    def enum(options: list) -> Check:
        return lambda value, at: None if any(value == o and type(value) is type(o) for o in options) \
            else f"{at}: not one of {', '.join(json.dumps(o) for o in options)}"

    @staticmethod
    def pattern(regex: str) -> Check:
        compiled = re.compile(regex)
        return lambda value, at: None if not isinstance(value, str) or compiled.search(value) \
            else f"{at}: does not match {regex}"

    @staticmethod
    def min_length(n: int) -> Check:
        return lambda value, at: None if not isinstance(value, str) or len(value) >= n else f"{at}: shorter than {n}"

    @staticmethod
    def minimum(n: float) -> Check:
        return lambda value, at: None if not _is_type(value, "number") or value >= n else f"{at}: below {n}"

    @staticmethod
    def maximum(n: float) -> Check:
        return lambda value, at: None if not _is_type(value, "number") or value <= n else f"{at}: above {n}"

    @staticmethod
    def min_items(n: int) -> Check:
        return lambda value, at: None if not isinstance(value, list) or len(value) >= n else f"{at}: fewer than {n} items"

    @staticmethod
    def required(names: list[str]) -> Check:
        def check(value, at):
            if isinstance(value, dict):
                for name in names:
                    if name not in value:
                        return f"{at}: {name} is required"
            return None
        return check

    def properties(self, props: dict) -> Check:
        checks = {name: self.node(sub) for name, sub in props.items()}

        def check(value, at):
            if isinstance(value, dict):
                for name, one in checks.items():
                    if name in value and (problem := one(value[name], f"{at}/{name}")) is not None:
                        return problem
            return None
        return check

    def additional(self, schema: Any, props: dict) -> Check:
        one = self.node(schema)

        def check(value, at):
            if isinstance(value, dict):
                for name in value:
                    if name not in props and (problem := one(value[name], f"{at}/{name}")) is not None:
                        return f"{at}: {name} is not allowed" if schema is False else problem
            return None
        return check

    def all_of(self, subs: list) -> Check:
        always = [self.node({k: v for k, v in s.items() if k not in ("if", "then")}) for s in subs]
        conditional = self.conditional(subs, lambda s: self.node(s["then"]))

        def check(value, at):
            for one in always:
                if (problem := one(value, at)) is not None:
                    return problem
            for condition, then in conditional(value):
                if condition(value, at) is None and (problem := then(value, at)) is not None:
                    return problem
            return None
        return check

    def conditional(self, subs: list, make) -> Callable[[Any], list]:
        """The (if, made from then) pairs of `subs` that may apply to a value. An `if` that pins the
        value's `kind` to a constant (as every one of the capture schema's does) is looked up by the
        value's kind instead of being tried on every value."""
        by_kind: dict[Any, list] = {}
        others = []
        for s in subs:
            if "if" not in s or "then" not in s:
                continue
            pair = (self.node(s["if"]), make(s))
            kind = s["if"].get("properties", {}).get("kind", {}).get("const")
            if kind is not None and "kind" in s["if"].get("required", ()):
                by_kind.setdefault(kind, []).append(pair)
            else:
                others.append(pair)
        return lambda value: by_kind.get(value.get("kind"), []) + others if isinstance(value, dict) else others

    def one_of(self, subs: list) -> Check:
        checks = [self.node(s) for s in subs]

        def check(value, at):
            passing = sum(one(value, at) is None for one in checks)
            return None if passing == 1 else f"{at}: matches {passing} of the {len(checks)} allowed forms, not one"
        return check

    def items(self, schema: Any, skip: int) -> Check:
        one = self.node(schema)

        def check(value, at):
            if isinstance(value, list):
                for i, item in enumerate(value[skip:], start=skip):
                    if (problem := one(item, f"{at}/{i}")) is not None:
                        return f"{at}: more than {skip} items" if schema is False else problem
            return None
        return check

    def prefix_items(self, subs: list) -> Check:
        checks = [self.node(s) for s in subs]

        def check(value, at):
            if isinstance(value, list):
                for i, (item, one) in enumerate(zip(value, checks)):
                    if (problem := one(item, f"{at}/{i}")) is not None:
                        return problem
            return None
        return check

    def unevaluated(self, schema: dict) -> Check:
        """unevaluatedProperties: false, as the schema uses it: a property is evaluated when the
        node's own `properties` or those of a `then` whose `if` holds name it."""
        if schema["unevaluatedProperties"] is not False:
            raise SchemaError("unevaluatedProperties is supported as false only")
        own = set(schema.get("properties", {}))
        conditional = self.conditional(schema.get("allOf", []), lambda s: set(s["then"].get("properties", {})))

        def check(value, at):
            if not isinstance(value, dict):
                return None
            known = set(own)
            for condition, names in conditional(value):
                if condition(value, at) is None:
                    known |= names
            extra = sorted(set(value) - known)
            return f"{at}: {extra[0]} is not allowed" if extra else None
        return check


@lru_cache(maxsize=1)
def record_check() -> Check:
    """The compiled check of one capture record."""
    root = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return _Compiler(root).node(root)


def schema_problem(record: Any) -> str | None:
    """Why `record` does not conform to capture.schema.json (a path and the rule), or None."""
    return record_check()(record, "record")
