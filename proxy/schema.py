"""The capture log's JSON Schema (capture.schema.json), compiled once into plain Python checks.

`jsonschema` takes over a millisecond a record, far too slow for `verify` on a long capture; this
compiles the keywords the schema uses (type, const, enum, required, properties, additionalProperties,
unevaluatedProperties, allOf with if/then, oneOf, $ref, pattern, minLength, minimum, maximum, items,
prefixItems, minItems) into closures. tests/test_schema.py checks it agrees with jsonschema on valid
and broken records of every kind. A keyword it does not know makes compiling fail, so the schema
cannot grow past what is checked.

The closures say why a record is wrong, and cost tens of microseconds a record. `verify` asks first
a predicate compiled from the same schema into the source of plain Python functions (`_Predicate`:
the same keywords with the same semantics, in the same order), which only says whether a record is
valid, in a few microseconds; only a record it finds wrong goes through the closures for the
message. tests/test_verify_fast.py checks the two agree. `record_valid_plain` is the same predicate
that also requires no float anywhere in the record: for a line verify read with orjson, that is what
makes the line's own bytes its canonical JSON (capturelog.canonical_record), answered in the one walk.

For verify's pass over whole lines in C (proxy/linecheck.py), `bulk_schema` translates the schema kind
by kind into msgspec types (`_Structs`), which that pass reads as its program; what they cannot say (the
patterns of a record's own fields, which of several objects a field holds) `BulkSchema` keeps beside them.
The pass answers what record_valid_plain answers of each record (tests/test_linecheck.py compares them
on mutated records), or leaves the record to the predicate, as for a value nested deeper than it reads.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal, NoReturn, Union

import msgspec

try:  # the standard library's reading of a pattern, for _Shape (a pattern it does not know is searched)
    from re import _constants as _sre
    from re import _parser as _sre_parser
except ImportError:  # pragma: no cover - another Python's re
    _sre = _sre_parser = None

from spillage.proxy.capturelog import _float_free

SCHEMA_PATH = Path(__file__).with_name("capture.schema.json")
ANNOTATIONS = frozenset({"$schema", "$id", "title", "description", "$defs"})

#: A check returns None when the value is valid, else why not (with a JSON-pointer-like path).
Check = Callable[[Any, str], "str | None"]



def ecma_regex(regex: str) -> re.Pattern:
    """A JSON Schema pattern as Python reads it: a final `$` ends the string, as in ECMA-262 (Python's
    `$` also matches before a final newline, so a hash followed by "\\n" would pass)."""
    if regex.endswith("$") and not regex.endswith("\\$"):
        regex = regex[:-1] + "\\Z"
    return re.compile(regex)


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
        compiled = ecma_regex(regex)
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


#: The keywords in the order a node checks them (then unevaluatedProperties, last).
KEYWORDS = tuple(_Compiler({}).keywords({}))
#: The order the predicate writes them in: a predicate says only whether, so the order is free, and an
#: array's length checked first spares the guards on its first items (`_Predicate.k_prefixItems`).
PREDICATE_KEYWORDS = ("type", "minItems", *(key for key in KEYWORDS if key not in ("type", "minItems")))

#: isinstance tests of each JSON type, as _is_type makes them.
_TYPE_TESTS = {
    "integer": "(type({v}) is int or isinstance({v}, int) and not isinstance({v}, bool))",  # the first: quick
    "number": "(isinstance({v}, (int, float)) and not isinstance({v}, bool))",
    "string": "isinstance({v}, str)", "object": "isinstance({v}, dict)", "array": "isinstance({v}, list)",
    "boolean": "isinstance({v}, bool)", "null": "{v} is None",
}


def admits_float(schema: dict) -> bool:
    """Whether a value that satisfies this node's own checks may still hold a float somewhere that no
    node below it looks at: False for a node that types it as a string, integer, boolean or null, or
    as an object whose every key some keyword covers, or as an array whose every item one does, or
    that allows only values (const, enum) of those types, compared type and all."""
    scalars = (str, int, bool, type(None))
    if "const" in schema and type(schema["const"]) in scalars:
        return False
    if "enum" in schema and all(type(option) in scalars for option in schema["enum"]):
        return False
    kind = schema.get("type")
    if kind in ("string", "integer", "boolean", "null"):
        return False
    if kind == "object":
        return "additionalProperties" not in schema and schema.get("unevaluatedProperties") is not False
    if kind == "array":
        return "items" not in schema
    return True


def float_free(value: Any) -> bool:
    """True when `value` (what orjson.loads returned) is no float and holds none."""
    kind = type(value)
    return kind is not float and (kind is not dict and kind is not list or _float_free(value))


class _Predicate:
    """A schema compiled into the source of Python functions `f(value) -> bool`: whether the value is
    valid, as _Compiler's check of it would return None, without the why. Each node's keywords are
    written out inline, in _Compiler's order with _Compiler's semantics (one comparison, one isinstance
    at a time), so a valid record costs no call per keyword and no path string per property. What the
    generated code knows is used: a value whose type was checked is not checked again, and an `if` is
    evaluated once for both allOf and unevaluatedProperties.

    With `plain`, the functions also require that no float lie anywhere in the value (see
    record_valid_plain): each node whose own checks do not already exclude one (no type, or a type
    that admits a number; an object with keys no keyword covers; an array with items none does) tests
    its value with `float_free`. An `if` stays as it is: a condition, not a constraint."""

    def __init__(self, root: dict, plain: bool = False) -> None:
        self.root = root
        self.plain = plain
        self.scope: dict[str, Any] = {"_is_type": _is_type, "float_free": float_free}  # the functions' globals
        self.sources: list[str] = []
        self.refs: dict[tuple[str, bool], str] = {}   # (pointer, plain) -> function, for recursive $refs
        self.count = 0
        self.known: dict[str, str] = {}      # variable -> the JSON type it is known to be, here
        self.held: dict[tuple, str] = {}     # (variable, id of an `if`) -> the variable holding its result
        self.lengths: dict[str, str] = {}    # list variable -> the variable holding its length, here
        self.min_lengths: dict[str, int] = {}  # list variable -> the length it is known to have at least
        self.covered: frozenset[str] = frozenset()  # plain: variables some node here answers for (no float)

    def compile(self) -> Callable[[Any], bool]:
        name = self.function(self.root)
        exec("\n\n".join(self.sources), self.scope)  # noqa: S102 - our own generated source
        return self.scope[name]

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def constant(self, value: Any) -> str:
        name = self.fresh("c")
        self.scope[name] = value
        return name

    def function(self, schema: Any, stack: tuple[str, ...] = (), name: str | None = None,
                 plain: bool | None = None) -> str:
        """The name of a generated function that returns whether a value satisfies `schema` (and, when
        `plain` (default: the compiler's), holds no float)."""
        name = name or self.fresh("f")
        body: list[str] = []
        outer = (self.known, self.held, self.lengths, self.min_lengths, self.covered, self.plain)
        self.known, self.held, self.lengths, self.min_lengths, self.covered = {}, {}, {}, {}, frozenset()
        self.plain = self.plain if plain is None else plain
        self.inline(schema, "v", "    ", body, stack)
        self.known, self.held, self.lengths, self.min_lengths, self.covered, self.plain = outer
        self.sources.append("\n".join([f"def {name}(v):", *body, "    return True"]))
        return name

    def inline(self, schema: Any, v: str, ind: str, out: list[str], stack: tuple[str, ...]) -> None:
        """Lines that `return False` when the value in variable `v` does not satisfy `schema`."""
        if schema is True:
            if self.plain and v not in self.covered:  # any value: plain, it may hold no float
                out.append(f"{ind}if not float_free({v}): return False")
            return
        if schema is False:
            out.append(f"{ind}return False")
            return
        unknown = set(schema) - ANNOTATIONS - set(KEYWORDS)
        if unknown:
            raise SchemaError(f"keyword(s) not supported: {', '.join(sorted(unknown))}")
        # plain: a node that hands the value on ($ref, oneOf) leaves it to the nodes it names; any other
        # tests it for floats unless its checks exclude them, and the nodes below it at the same value
        # (allOf, then) need not test it again.
        saved_covered = self.covered
        if self.plain and v not in self.covered and "$ref" not in schema and "oneOf" not in schema:
            if admits_float(schema):
                out.append(f"{ind}if not float_free({v}): return False")
            self.covered = self.covered | {v}
        # After the node's own `type` check (the first of its keywords), or an enclosing node's of the
        # same value, the value is known to be of that type: guards (isinstance(v, dict) and ...) go.
        saved, saved_lengths, saved_min = self.known, self.lengths, self.min_lengths
        typed = {**saved, v: schema["type"]} if isinstance(schema.get("type"), str) else saved
        for key in PREDICATE_KEYWORDS:
            if key in schema and key not in ("unevaluatedProperties", "if", "then"):
                self.known = typed if key != "type" else saved
                getattr(self, "k_" + key.lstrip("$"))(schema, schema[key], v, ind, out, stack)
                if key == "type" and typed.get(v) == "array" and ({"prefixItems", "minItems"} & set(schema)
                                                                  or schema.get("items") is False):
                    self.lengths = {**self.lengths, v: self.fresh("n")}  # a list's length, taken once
                    out.append(f"{ind}{self.lengths[v]} = len({v})")
        if "unevaluatedProperties" in schema:
            self.known = typed
            self.unevaluated(schema, v, ind, out, stack)
        self.known, self.lengths, self.min_lengths, self.covered = saved, saved_lengths, saved_min, saved_covered

    def length(self, v: str) -> str:
        return self.lengths.get(v, f"len({v})")

    def guard(self, v: str, name: str) -> str:
        """`isinstance(v, T) and ` for JSON type `name`, or nothing when it is known to hold."""
        known = self.known.get(v)
        if known == name or (name == "number" and known == "integer"):
            return ""
        return _TYPE_TESTS[name].format(v=v) + " and "

    def block(self, v: str, name: str, ind: str) -> str:
        """The `if isinstance(v, T):` that opens a block of checks, `if True:` when known."""
        return f"{ind}if {self.guard(v, name)[:-5] or 'True'}:"

    def k_type(self, schema, name, v, ind, out, stack):
        test = _TYPE_TESTS[name].format(v=v) if isinstance(name, str) and name in _TYPE_TESTS \
            else f"_is_type({v}, {self.constant(name)})"
        out.append(f"{ind}if not {test}: return False")

    def k_const(self, schema, expected, v, ind, out, stack):
        c = self.constant(expected)
        out.append(f"{ind}if not ({v} == {c} and type({v}) is type({c})): return False")

    def k_enum(self, schema, options, v, ind, out, stack):
        kinds = {type(o) for o in options}
        if len(kinds) == 1 and kinds <= {str, int}:  # type(v) is T and v == o, for a set of o of type T
            t, members = self.constant(kinds.pop()), self.constant(frozenset(options))
            out.append(f"{ind}if not (type({v}) is {t} and {v} in {members}): return False")
            return
        tests = [f"({v} == {c} and type({v}) is type({c}))" for c in map(self.constant, options)]
        out.append(f"{ind}if not ({' or '.join(tests) or 'False'}): return False")

    def k_pattern(self, schema, regex, v, ind, out, stack):
        out.append(f"{ind}if {self.guard(v, 'string')}not {self.constant(ecma_regex(regex))}.search({v}): return False")

    def k_minLength(self, schema, n, v, ind, out, stack):
        out.append(f"{ind}if {self.guard(v, 'string')}not len({v}) >= {self.constant(n)}: return False")

    def k_minimum(self, schema, n, v, ind, out, stack):
        out.append(f"{ind}if {self.guard(v, 'number')}not {v} >= {self.constant(n)}: return False")

    def k_maximum(self, schema, n, v, ind, out, stack):
        out.append(f"{ind}if {self.guard(v, 'number')}not {v} <= {self.constant(n)}: return False")

    def k_minItems(self, schema, n, v, ind, out, stack):
        guard = self.guard(v, "array")
        out.append(f"{ind}if {guard}not {self.length(v)} >= {self.constant(n)}: return False")
        if not guard:  # an array of at least n items from here on
            self.min_lengths = {**self.min_lengths, v: n}

    def k_required(self, schema, names, v, ind, out, stack):
        if names:
            tests = " and ".join(f"{self.constant(name)} in {v}" for name in names)
            out.append(f"{ind}if {self.guard(v, 'object')}not ({tests}): return False")

    def k_properties(self, schema, props, v, ind, out, stack):
        head, body = self.block(v, "object", ind), []
        required = set(schema.get("required", ()))   # checked before, in this block: those keys are there
        for name, sub in props.items():
            x, inner = self.fresh("x"), []
            present = name in required
            self.inline(sub, x, ind + ("    " if present else "        "), inner, stack)
            if inner:
                key = self.constant(name)
                if present:
                    body += [f"{ind}    {x} = {v}[{key}]", *inner]
                else:
                    body += [f"{ind}    if {key} in {v}:", f"{ind}        {x} = {v}[{key}]", *inner]
        if body:
            out += [head, *body]

    def k_additionalProperties(self, schema, sub, v, ind, out, stack):
        if sub is False:  # no name but the node's own: one subset test, in C, instead of a loop
            known = self.constant(frozenset(schema.get("properties", {})))
            out.append(f"{ind}if {self.guard(v, 'object')}not {known}.issuperset({v}): return False")
            return
        head, k, x, inner = self.block(v, "object", ind), self.fresh("k"), self.fresh("x"), []
        self.inline(sub, x, ind + "            ", inner, stack)
        if inner:
            known = self.constant(frozenset(schema.get("properties", {})))
            out += [head, f"{ind}    for {k} in {v}:",
                    f"{ind}        if {k} not in {known}:", f"{ind}            {x} = {v}[{k}]", *inner]

    def k_allOf(self, schema, subs, v, ind, out, stack):
        for s in subs:
            self.inline({k: val for k, val in s.items() if k not in ("if", "then")}, v, ind, out, stack)
        self.conditional(subs, v, ind, out, stack, lambda s, first, ind2: self.inline(s["then"], v, ind2, out, stack))

    def conditional(self, subs, v, ind, out, stack, then) -> None:
        """For each (if, then) of `subs` that may apply to the value, `if <if holds>:` and what
        `then(s, first of its group, indent)` writes under it; the pairs whose `if` pins `kind` are
        looked up by the value's kind, as _Compiler.conditional does."""
        by_kind: dict[Any, list] = {}
        others = []
        for s in subs:
            if "if" not in s or "then" not in s:
                continue
            kind = s["if"].get("properties", {}).get("kind", {}).get("const")
            if kind is not None and "kind" in s["if"].get("required", ()):
                by_kind.setdefault(kind, []).append(s)
            else:
                others.append(s)
        if by_kind:
            groups = self.constant({kind: n for n, kind in enumerate(by_kind, start=1)})
            g = self.held.setdefault((v, "kind"), self.fresh("g"))
            out += [self.block(v, "object", ind), f"{ind}    {g} = {groups}.get({v}.get('kind'), 0)"]
            for n, pairs in enumerate(by_kind.values(), start=1):
                out.append(f"{ind}    {'if' if n == 1 else 'elif'} {g} == {n}:")
                self.pairs(pairs, v, ind + "        ", out, stack, then, first=True)
        self.pairs(others, v, ind, out, stack, then, first=False)

    def pairs(self, pairs, v, ind, out, stack, then, first: bool) -> None:
        """`if <if>:` and `then(s, first, indent)` for each pair; `first`: of the conditional's pairs,
        none has applied before these."""
        for n, s in enumerate(pairs):
            held = self.held.get((v, id(s["if"])))
            if held is None:  # evaluated here, kept for the next conditional over the same pairs
                held = self.held[(v, id(s["if"]))] = self.fresh("i")
                out.append(f"{ind}{held} = {self.function(s['if'], stack, plain=False)}({v})")
            out.append(f"{ind}if {held}:")
            mark = len(out)
            then(s, first and n == 0, ind + "    ")
            if len(out) == mark:
                out.append(f"{ind}    pass")

    def k_oneOf(self, schema, subs, v, ind, out, stack):
        calls = " + ".join(f"{self.function(s, stack)}({v})" for s in subs) or "0"
        out.append(f"{ind}if ({calls}) != 1: return False")

    def k_ref(self, schema, pointer, v, ind, out, stack):
        if pointer in stack:  # a recursive reference: a function of its own
            key = (pointer, self.plain)
            if key not in self.refs:
                self.refs[key] = self.fresh("r")
                self.function(self.resolve(pointer), stack, name=self.refs[key])
            out.append(f"{ind}if not {self.refs[key]}({v}): return False")
            return
        self.inline(self.resolve(pointer), v, ind, out, (*stack, pointer))

    def resolve(self, pointer: str) -> Any:
        node = self.root
        for part in pointer.removeprefix("#/").split("/"):
            node = node[part]
        return node

    def k_items(self, schema, sub, v, ind, out, stack):
        skip = len(schema.get("prefixItems", []))
        if sub is False:
            out.append(f"{ind}if {self.guard(v, 'array')}{self.length(v)} > {skip}: return False")
            return
        head, x, inner = self.block(v, "array", ind), self.fresh("x"), []
        self.inline(sub, x, ind + "        ", inner, stack)
        if inner:
            out += [head, f"{ind}    for {x} in {v}{f'[{skip}:]' if skip else ''}:", *inner]

    def k_prefixItems(self, schema, subs, v, ind, out, stack):
        head, body = self.block(v, "array", ind), []
        for i, sub in enumerate(subs):
            x, inner = self.fresh("x"), []
            if i < self.min_lengths.get(v, 0):  # the item is there
                self.inline(sub, x, ind + "    ", inner, stack)
                body += [f"{ind}    {x} = {v}[{i}]", *inner] if inner else []
                continue
            self.inline(sub, x, ind + "        ", inner, stack)
            if inner:
                body += [f"{ind}    if {self.length(v)} > {i}:", f"{ind}        {x} = {v}[{i}]", *inner]
        if body:
            out += [head, *body]

    def unevaluated(self, schema, v, ind, out, stack):
        if schema["unevaluatedProperties"] is not False:
            raise SchemaError("unevaluatedProperties is supported as false only")
        own = frozenset(schema.get("properties", {}))
        known = self.fresh("known")
        out += [self.block(v, "object", ind), f"{ind}    {known} = {self.constant(own)}"]

        def names(s, first, ind2):  # the first `then` to apply adds its names to the node's own
            more = frozenset(s["then"].get("properties", {}))
            out.append(f"{ind2}{known} = {self.constant(own | more) if first else f'{known} | {self.constant(more)}'}")
        self.conditional(schema.get("allOf", []), v, ind + "    ", out, stack, names)
        out.append(f"{ind}    if not {known}.issuperset({v}): return False")


@lru_cache(maxsize=1)
def record_check() -> Check:
    """The compiled check of one capture record."""
    root = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return _Compiler(root).node(root)


@lru_cache(maxsize=1)
def record_valid() -> Callable[[Any], bool]:
    """The compiled predicate of one capture record: True when record_check finds nothing wrong."""
    root = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return _Predicate(root).compile()


@lru_cache(maxsize=1)
def record_valid_plain() -> Callable[[Any], bool]:
    """record_valid, and no float anywhere in the record: True means what record_valid(record) and
    capturelog's _float_free(record) both say. It answers both in one walk, for verify; False says
    only that one of them, or both, is false."""
    root = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return _Predicate(root, plain=True).compile()


def schema_problem(record: Any) -> str | None:
    """Why `record` does not conform to capture.schema.json (a path and the rule), or None."""
    if record_valid()(record):
        return None
    return record_check()(record, "record")


# --- The same schema as msgspec types: the program of verify's pass over whole lines in C ------------

#: How deep a value the schema leaves open (`true`, `{"type": "object"}`) may nest for the C pass to take
#: it; a deeper one is left to the predicate.
OPEN_DEPTH = 6
#: A node's keywords that say nothing about the values it admits.
_NOTES = frozenset({"description", "title"})


class Unsupported(Exception):
    """A schema node that _Structs (or linecheck) does not translate: the C pass leaves that kind to the predicate."""


def _open_value(depth: int) -> Any:
    """Any JSON value but a float, nested at most `depth` arrays or objects deep: what a node that admits
    anything admits, in a plain record (no float anywhere: see record_valid_plain)."""
    scalar = None | bool | int | str
    if depth == 0:
        return scalar
    inner = _open_value(depth - 1)
    return scalar | list[inner] | dict[str, inner]


@dataclass(frozen=True)
class BulkSchema:
    """capture.schema.json for the record kinds that _Structs translates, as msgspec types, which verify's
    C pass reads (proxy/linecheck.py) to check whole records at once: `records_type` says every keyword of
    the schema but the `pattern` of a record's own required string fields (`patterns`, with the _Shape
    each is, or None), and which of several objects a `oneOf` field holds (`choices`: the key sets that
    make exactly one of them)."""

    kinds: frozenset[str]
    records_type: Any
    patterns: tuple[tuple[str, re.Pattern, "_Shape | None", frozenset[str]], ...]   # (field, regex, shape, kinds)
    choices: tuple[tuple[str, frozenset[frozenset[str]], frozenset[str]], ...]      # (field, key sets, kinds)


class _Shape:
    """A pattern of ASCII characters that is a run of one set of them (`^[set]+$`, `^[set]*$`), or of a
    fixed length with one set (or one character) at each place, the sets apart (`^[0-9]{4}-[0-9]{2}$`), as
    verify's C pass matches a string's bytes against it (linecheck.py): a run's `members` (at least
    `minimum` of them), or for a fixed length the `template`, each place's set as the number `table` gives
    each of its characters. `of(pattern)` is None for any other pattern."""

    def __init__(self, template: bytes | None, table: bytes, minimum: int, members: bytes) -> None:
        self.template, self.table, self.minimum, self.members = template, table, minimum, members

    @classmethod
    def of(cls, pattern: str) -> "_Shape | None":
        try:
            parsed = list(_sre_parser.parse(ecma_regex(pattern).pattern))
        except (AttributeError, re.error):
            return None
        at, end = _sre.AT, _sre.AT_END_STRING
        if parsed[:1] != [(at, _sre.AT_BEGINNING)] or parsed[-1:] != [(at, end)]:
            return None
        places: list[frozenset[int]] = []
        for op, arg in parsed[1:-1]:
            if op == _sre.LITERAL:
                if arg >= 128:
                    return None
                places.append(frozenset([arg]))
                continue
            if op is not _sre.MAX_REPEAT or len(arg[2]) != 1:
                return None
            low, high, [(item_op, items)] = arg
            chars = cls.chars(item_op, items)
            if chars is None:
                return None
            if high == _sre.MAXREPEAT:
                if len(parsed) != 3 or low > 1:
                    return None
                return cls(None, b"", low, bytes(sorted(chars)))
            if low != high:
                return None
            places += [chars] * low
        sets = sorted(set(places), key=sorted)
        if not places or any(a & b for i, a in enumerate(sets) for b in sets[i + 1:]):
            return None
        table = bytearray(256)   # a character of no set stands for 0, which no place holds
        for n, chars in enumerate(sets, start=1):
            for c in chars:
                table[c] = n
        return cls(bytes(table[c] for c in (min(p) for p in places)), bytes(table), 0, b"")

    @staticmethod
    def chars(op: Any, items: Any) -> frozenset[int] | None:
        """The ASCII characters an IN (or LITERAL) item of a parsed pattern takes; None for another."""
        if op == _sre.LITERAL:
            return frozenset([items]) if items < 128 else None
        if op != _sre.IN:
            return None
        chars: set[int] = set()
        for kind, value in items:
            if kind == _sre.LITERAL and value < 128:
                chars.add(value)
            elif kind == _sre.RANGE and value[1] < 128:
                chars.update(range(value[0], value[1] + 1))
            else:
                return None   # NEGATE, a category, beyond ASCII
        return frozenset(chars)


class _Structs:
    """Translates the capture schema, kind by kind, into msgspec Structs (see BulkSchema). What a kind's
    record may hold is the root's properties and those of the `then` whose `if` pins the kind; a kind
    any other `if` might apply to, or whose nodes use what msgspec cannot say exactly, is not translated.

    The translation, node by node: integer → int with ge/le (msgspec takes no bool and no float for an
    int); string → str with min_length (code points, as JSON Schema counts) and pattern (as ecma_regex
    reads it; msgspec searches, as _Predicate does); boolean, null, enum and const of strings, integers or
    true → their Literal; an array's items → list; [a, b] exactly (prefixItems, minItems 2, items false)
    → tuple; an object with additionalProperties false → a Struct that forbids other fields, its
    required fields without default; with additionalProperties a schema → dict; a oneOf of X and null
    → X | None; a record's oneOf of null and objects that forbid other keys → one Struct of all their
    properties and the key sets that make exactly one of them (BulkSchema.choices); true and a bare
    object → anything but a float (_open_value)."""

    def __init__(self, root: dict) -> None:
        self.root = root
        self.count = 0

    def resolve(self, pointer: str) -> Any:
        node = self.root
        for part in pointer.removeprefix("#/").split("/"):
            node = node[part]
        return node

    def deref(self, node: Any) -> Any:
        while isinstance(node, dict) and "$ref" in node:
            if set(node) - {"$ref"} - _NOTES:
                raise Unsupported("$ref beside other keywords")
            node = self.resolve(node["$ref"])
        return node

    def kind_fields(self, kind: str) -> tuple[dict, set]:
        """The properties and required names of a record of `kind`."""
        root = self.root
        if set(root) - ANNOTATIONS - {"type", "required", "properties", "allOf", "unevaluatedProperties"} \
                or root.get("type") != "object" or root.get("unevaluatedProperties") is not False:
            raise Unsupported("the root")
        props, required = dict(root.get("properties", {})), set(root.get("required", ()))
        for sub in root.get("allOf", ()):
            if set(sub) != {"if", "then"}:
                raise Unsupported("allOf without if/then")
            condition = sub["if"]
            pinned = condition.get("properties", {}).get("kind", {}).get("const")
            if pinned is None or "kind" not in condition.get("required", ()):
                raise Unsupported("an if that does not pin the kind")
            if pinned != kind:
                continue
            if set(condition) != {"properties", "required"} or set(condition["properties"]) != {"kind"} \
                    or condition["properties"]["kind"] != {"const": kind}:
                raise Unsupported("an if that asks more than the kind")
            then = sub["then"]
            if set(then) - {"required", "properties"}:
                raise Unsupported("a then that is not properties and required")
            for name, node in then.get("properties", {}).items():
                if name in props:
                    raise Unsupported("a property the root names too")
                props[name] = node
            required |= set(then.get("required", ()))
        if not required <= set(props):
            raise Unsupported("a required name no property describes")
        return props, required

    def record(self, kind: str) -> tuple[type, list, list]:
        """The Struct of a record of `kind`, and the checks left to BulkSchema: patterns, choices."""
        props, required = self.kind_fields(kind)
        fields, patterns, choices = [], [], []
        for name, node in props.items():
            if name == "kind":
                continue
            node = self.deref(node)
            if name in required and isinstance(node, dict) and node.get("type") == "string" and "pattern" in node:
                patterns.append((name, node["pattern"]))
                node = {k: v for k, v in node.items() if k != "pattern"}
            choice = self.objects_choice(node["oneOf"]) if isinstance(node, dict) and "oneOf" in node else None
            if choice is not None:
                if name not in required or set(node) - _NOTES != {"oneOf"}:
                    raise Unsupported("a choice of objects that may be missing")
                kind_type, keysets = choice
                choices.append((name, keysets))
            else:
                kind_type = self.type_of(node)
            fields.append((name, kind_type) if name in required else (name, kind_type, msgspec.UNSET))
        return self.struct(fields, tag=kind), patterns, choices

    def struct(self, fields: list, tag: str | None = None) -> type:
        """A Struct of `fields` ((name, type) or (name, type, default)) that forbids any other."""
        self.count += 1
        renamed = [(f"f{i}", *rest) for i, (_, *rest) in enumerate(fields)]
        rename = {f"f{i}": name for i, (name, *_) in enumerate(fields)}
        options = {"tag_field": "kind", "tag": tag} if tag is not None else {}
        return msgspec.defstruct(f"S{self.count}", renamed, kw_only=True, forbid_unknown_fields=True,
                                 gc=False, rename=rename, **options)

    def type_of(self, node: Any) -> Any:
        node = self.deref(node)
        if node is True:
            return _open_value(OPEN_DEPTH)
        if not isinstance(node, dict):
            raise Unsupported(f"node {node!r}")
        keys = set(node) - _NOTES
        if "oneOf" in node:
            subs = [self.deref(s) for s in node["oneOf"]]
            nulls = [s for s in subs if s == {"type": "null"}]
            if keys != {"oneOf"} or len(subs) != 2 or len(nulls) != 1:
                raise Unsupported("oneOf other than X or null")
            other = self.type_of(subs[0] if subs[1] in nulls else subs[1])
            if other is None or _admits_null(other):
                raise Unsupported("oneOf of two that both admit null")
            return other | None
        if "enum" in node or "const" in node:
            if len(keys) != 1:
                raise Unsupported("enum or const beside other keywords")
            options = node["enum"] if "enum" in node else [node["const"]]
            if not options or not (all(type(o) is str for o in options) or all(type(o) is int for o in options)
                                   or options == [True]):
                raise Unsupported("enum of mixed or other types")
            return Literal[tuple(options)]
        kind = node.get("type")
        if kind == "integer" and keys <= {"type", "minimum", "maximum"}:
            bounds = {"ge": node.get("minimum"), "le": node.get("maximum")}
            bounds = {k: v for k, v in bounds.items() if v is not None}
            if any(type(v) is not int for v in bounds.values()):
                raise Unsupported("a bound that is not an integer")
            return Annotated[int, msgspec.Meta(**bounds)] if bounds else int
        if kind == "string" and keys <= {"type", "minLength", "pattern"}:
            meta = {}
            if "minLength" in node:
                meta["min_length"] = node["minLength"]
            if "pattern" in node:
                meta["pattern"] = ecma_regex(node["pattern"]).pattern
            return Annotated[str, msgspec.Meta(**meta)] if meta else str
        if kind == "boolean" and keys == {"type"}:
            return bool
        if kind == "null" and keys == {"type"}:
            return None
        if kind == "array":
            if keys == {"type", "items"}:
                return list[self.type_of(node["items"])]
            prefix = node.get("prefixItems", [])
            if keys == {"type", "prefixItems", "minItems", "items"} and node["items"] is False \
                    and node["minItems"] == len(prefix):
                return tuple[tuple(self.type_of(s) for s in prefix)]
            raise Unsupported("an array other than items, or exactly prefixItems")
        if kind == "object":
            if keys == {"type"}:
                return dict[str, _open_value(OPEN_DEPTH - 1)]
            if keys == {"type", "additionalProperties"} and isinstance(node["additionalProperties"], dict):
                return dict[str, self.type_of(node["additionalProperties"])]
            if keys <= {"type", "required", "properties", "additionalProperties"} \
                    and node.get("additionalProperties") is False:
                required = set(node.get("required", ()))
                props = node.get("properties", {})
                if not required <= set(props):
                    raise Unsupported("a required name no property describes")
                return self.struct([(name, self.type_of(sub)) if name in required
                                    else (name, self.type_of(sub), msgspec.UNSET) for name, sub in props.items()])
        raise Unsupported(f"node with {sorted(keys)}")

    def objects_choice(self, subs: list) -> tuple[Any, frozenset[frozenset[str]]] | None:
        """For a oneOf of null and objects that each forbid other keys (and describe a key they share the
        same way): the Struct of all their keys, | None, and the key sets with which an object is exactly
        one of them. None for any other oneOf."""
        subs = [self.deref(s) for s in subs]
        objects = [s for s in subs if s != {"type": "null"}]
        if len(subs) - len(objects) != 1 or len(objects) < 2:
            return None
        props: dict[str, Any] = {}
        branches = []
        for s in objects:
            if not isinstance(s, dict) or set(s) - _NOTES != {"type", "required", "properties", "additionalProperties"} \
                    or s["type"] != "object" or s["additionalProperties"] is not False:
                return None
            for name, sub in s["properties"].items():
                if props.setdefault(name, sub) != sub:
                    return None
            branches.append((frozenset(s["required"]), frozenset(s["properties"])))
        if len(props) > 12 or not all(req <= names for req, names in branches):
            return None
        names = sorted(props)
        keysets = set()
        for mask in range(1 << len(names)):
            present = frozenset(n for i, n in enumerate(names) if mask >> i & 1)
            if sum(req <= present <= allowed for req, allowed in branches) == 1:
                keysets.add(present)
        always = frozenset.intersection(*(req for req, _ in branches))
        merged = self.struct([(name, self.type_of(props[name])) if name in always
                              else (name, self.type_of(props[name]), msgspec.UNSET) for name in names])
        return merged | None, frozenset(keysets)


def _admits_null(kind: Any) -> bool:
    return kind is None or None in getattr(kind, "__args__", ())


@lru_cache(maxsize=4)
def bulk_schema(kinds: frozenset[str] | None = None) -> BulkSchema:
    """The BulkSchema of the record kinds `kinds` (default: every kind the schema names) that _Structs
    translates."""
    root = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    structs = _Structs(root)
    wanted = kinds if kinds is not None else frozenset(root["properties"]["kind"]["enum"])
    taken, types, patterns, choices = set(), [], {}, {}
    for kind in sorted(wanted):
        try:
            struct, kind_patterns, kind_choices = structs.record(kind)
        except Unsupported:
            continue
        taken.add(kind)
        types.append(struct)
        for name, pattern in kind_patterns:
            patterns.setdefault((name, pattern), set()).add(kind)
        for name, keysets in kind_choices:
            choices.setdefault((name, keysets), set()).add(kind)
    every = frozenset(taken)
    records_type = list[Union[tuple(types)]] if types else list[NoReturn]
    return BulkSchema(
        every, records_type,
        tuple((name, ecma_regex(pattern), _Shape.of(pattern), frozenset(ks)) for (name, pattern), ks in patterns.items()),
        tuple((name, keysets, frozenset(ks)) for (name, keysets), ks in choices.items()))
