"""verify's one pass over a log's lines in C (`_linecheck.c`), and the program of record types it checks.

For each line the C pass reads the bytes once: it proves them the contract's canonical JSON with a strict
scanner, checks the record against its kind's type, computes the hash of its content, its Merkle leaf and
its inline body's SHA-256, and takes the line only when all of it is right. What it checks the records
with is capture.schema.json as `schema.bulk_schema` translates it into msgspec types, read through
`msgspec.inspect` into nodes the C code walks (`_node`), with the patterns of a record's own fields and its
choice of body objects that `BulkSchema` keeps beside them. A line it does not take is read by
`verify.line_facts`, which says what is wrong with it, if anything (tests/test_linecheck.py: a line taken
is one the Python reading finds clean, with the same facts).

`scanner()` is None when the extension was not built (setup.py makes it optional): verify then reads
every line the Python way.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache, partial

import msgspec.inspect as mi

from spillage.proxy.capturelog import MAX_LINE_BYTES
from spillage.proxy.capturelog import canonical_json
from spillage.proxy.schema import _Shape
from spillage.proxy.schema import bulk_schema
from spillage.proxy.schema import Unsupported

try:
    from spillage.proxy import _linecheck
except ImportError:  # built without a C compiler or OpenSSL's headers
    _linecheck = None


@lru_cache(maxsize=1)
def scanner(kinds: frozenset[str], exchanges: frozenset[str]) -> Callable[[bytes, int], tuple[int, list]] | None:
    """scan(buffer, pos) -> (pos, groups) for records of `kinds` (`exchanges`: those that are an exchange),
    as _linecheck.c describes it; None without the extension."""
    if _linecheck is None:
        return None
    return partial(_linecheck.scan, _linecheck.compile(program(kinds, exchanges)), MAX_LINE_BYTES)


def program(kinds: frozenset[str], exchanges: frozenset[str]) -> tuple:
    """((kind, node, is an exchange), ...) for the kinds of `kinds` that bulk_schema translates."""
    bulk = bulk_schema(kinds)
    records = mi.type_info(bulk.records_type).item_type
    out = []
    for struct in (records.types if isinstance(records, mi.UnionType) else (records,)):
        kind = struct.tag
        shapes = {name: shape for name, _, shape, where in bulk.patterns if kind in where}
        choices = {name: keysets for name, keysets, where in bulk.choices if kind in where}
        try:
            fields = [(f.encode_name, _field(f.type, shapes.get(f.encode_name, False), choices.get(f.encode_name)),
                       f.required) for f in struct.fields]
        except Unsupported:
            continue   # a kind whose lines Python reads
        out.append((kind, _struct(fields, None), kind in exchanges))
    return tuple(out)


def _field(t: mi.Type, shape: _Shape | None | bool, keysets: frozenset[frozenset[str]] | None) -> tuple:
    """The node of a record's own field: `shape` is the pattern BulkSchema keeps for it (None: one that
    is no shape; False: none), `keysets` its choice of objects."""
    if shape is not False:
        return _str(t, shape) if shape is not None else ("unchecked",)
    return _choice(t, keysets) if keysets is not None else _node(t)


def _node(t: mi.Type) -> tuple:
    """The C pass's node for a msgspec type (Unsupported for one it has none for)."""
    if isinstance(t, mi.IntType):
        if t.gt is not None or t.lt is not None or t.multiple_of is not None:
            raise Unsupported("an integer bound other than minimum and maximum")
        return ("int", t.ge, t.le)
    if isinstance(t, mi.StrType):
        return _str(t, _Shape.of(t.pattern) if t.pattern is not None else None)
    if isinstance(t, mi.BoolType):
        return ("bool",)
    if isinstance(t, mi.NoneType):
        return ("null",)
    if isinstance(t, mi.LiteralType):
        return ("literal", tuple(map(canonical_json, t.values)))
    if isinstance(t, mi.ListType):
        return ("list", _node(t.item_type), t.min_length, t.max_length)
    if isinstance(t, mi.TupleType):
        return ("tuple", tuple(map(_node, t.item_types)))
    if isinstance(t, mi.DictType):
        if t.key_type != mi.StrType() or t.min_length is not None or t.max_length is not None:
            raise Unsupported("a dict with constrained keys or size")
        return ("dict", _node(t.value_type))
    if isinstance(t, mi.UnionType):
        return ("union", tuple(map(_node, t.types)))
    if isinstance(t, mi.StructType):
        return _struct([(f.encode_name, _node(f.type), f.required) for f in t.fields], None)
    raise Unsupported(f"the type {t!r}")


def _str(t: mi.StrType, shape: _Shape | None) -> tuple:
    """A string node; its pattern is the shape's, and one that no shape is has no node: the C pass leaves
    a string it must match to Python."""
    if t.pattern is not None and shape is None:
        return ("unchecked",)
    if shape is None:
        described = None
    elif shape.template is None:
        described = ("members", shape.members, shape.minimum)
    else:
        described = ("template", shape.template, shape.table)
    return ("str", t.min_length, t.max_length, described)


def _choice(t: mi.Type, keysets: frozenset[frozenset[str]]) -> tuple:
    """The node of a field that is null or one of several objects (BulkSchema.choices): the one struct of
    all their fields, and the key sets with which an object is exactly one of them."""
    if not isinstance(t, mi.UnionType):
        raise Unsupported("a choice that is not a union")
    return ("union", tuple(_struct([(f.encode_name, _node(f.type), f.required) for f in m.fields], keysets)
                           if isinstance(m, mi.StructType) else _node(m) for m in t.types))


def _struct(fields: list[tuple[str, tuple, bool]], keysets: frozenset[frozenset[str]] | None) -> tuple:
    """A struct node: its fields sorted as canonical JSON sorts keys (by their UTF-8 bytes, the order of
    their code points), and the key sets allowed as bitmasks over them."""
    named = sorted((name.encode(), node, required) for name, node, required in fields)
    if keysets is None:
        return ("struct", tuple(named), None)
    index = {name.decode(): i for i, (name, _, _) in enumerate(named)}
    return ("struct", tuple(named), tuple(sum(1 << index[key] for key in keyset) for keyset in keysets))
