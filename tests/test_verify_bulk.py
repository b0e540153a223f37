"""verify's bulk path finds what reading the log line by line finds.

`_chunk_facts` reads lines BATCH at a time; a batch whose lines are canonical JSON is parsed and compared
in C, and clean lines of the bare kinds in a row are checked at once: the schema by msgspec
(schema.BulkSchema, translated from capture.schema.json), the patterns of a record's own fields by
_Shape, hashes and bodies in a row (verify._fast_run). Here that is compared with the reading it stands
for: line_facts of each line, merged into runs as before, on real logs and on logs whose lines were
damaged, re-hashed after an edit the schema refuses, or shuffled; and BulkSchema and _Shape with the
predicate and the regular expressions they stand for, on records and strings mutated at random.
"""

from __future__ import annotations

import copy
import json
import random
import re
from pathlib import Path

import msgspec
import pytest
from capture_helpers import NOW, lines_of, put_lines
from test_verify_fast import damaged, same

from spillage.proxy import verify as verify_module
from spillage.proxy.capturelog import canonical_json
from spillage.proxy.capturelog import record_hash
from spillage.proxy.layout import LOG_NAME
from spillage.proxy.schema import OPEN_DEPTH
from spillage.proxy.schema import SCHEMA_PATH
from spillage.proxy.schema import _Shape
from spillage.proxy.schema import bulk_schema
from spillage.proxy.schema import ecma_regex
from spillage.proxy.schema import record_valid_plain
from spillage.proxy.verify import BARE_KINDS
from spillage.proxy.verify import _chunk_facts
from spillage.proxy.verify import _Runs
from spillage.proxy.verify import line_facts
from spillage.proxy.verify import verify

from test_verify_fast import sessions  # noqa: F401  (the fixture: every kind, plain and signed, and the corpus)



def reference(log: Path) -> list:
    """What _chunk_facts found before it read lines in batches: each line's line_facts, in order, merged
    into runs, up to the first line that holds no record."""
    runs = _Runs()
    with open(log, "rb") as f:
        while raw := f.readline(verify_module.MAX_LINE_BYTES):
            if not runs.line(line_facts(raw, lambda: not f.peek(1), log.parent)):
                break
    runs.close()
    return runs.out


def same_items(a: list, b: list) -> bool:
    def flat(item):
        return ("run", *item[1:], tuple(item.first)) if isinstance(item, verify_module._Run) else item
    return len(a) == len(b) and all(same(flat(x), flat(y)) for x, y in zip(a, b))


#: Values put in place of a record's own, for the schema to refuse (or, some of them, accept).
ODD = [None, "", "x", "X" * 64, "ab" * 32, "AB" * 32, "ab" * 32 + "\n", "٣" * 4, -1, 0, 99, 100, 999, 1000,
       65536, 2**64, 2**70, True, False, [], {}, [["a", "b"]], [["a"]], [["a", "b", "c"]], [["a", 1]], ["a", "b"],
       [[]], {"size": 1, "sha256": "ab" * 32, "text": "t"}, {"size": 1, "sha256": "ab" * 32, "blob": True},
       {"size": 0, "sha256": "ab" * 32, "text": ""}, {"size": 1, "sha256": "ab" * 32, "text": "t", "blob": True},
       {"size": 1, "sha256": "ab" * 32, "base64": "AA=="}, {"size": 1, "sha256": "ab" * 32, "base64": "A==="},
       {"size": 1, "sha256": "ab" * 32, "blob": False}, {"size": 1, "sha256": "AB" * 32, "text": "t"},
       {"size": 1, "text": "t"}, {"a": {"b": {"c": {"d": {"e": {"f": {"g": [1]}}}}}}}, [[[[[[[[["deep"]]]]]]]]],
       "GET", "GE T", "G\nET", "", "2026-12-01T00:00:00.000000Z", "2026-12-01T00:00:00.000000Z\n",
       "2026-12-01 00:00:00.000000Z", "2026-12-01T00:00:00.00000Z", "２026-12-01T00:00:00.000000Z"]
KEYS = ["v", "seq", "ts", "kind", "prev", "hash", "flow", "method", "url", "http_version", "headers", "body",
        "request", "status", "reason", "event", "data", "enctype", "fields", "host", "port", "background",
        "message", "unknown"]


def mutated(record: dict, rng: random.Random) -> dict:
    """The record with one to three fields replaced, added or removed, or a value inside one changed."""
    wrong = copy.deepcopy(record)
    for _ in range(rng.randrange(1, 4)):
        how = rng.randrange(5)
        key = rng.choice([*wrong, *KEYS])
        if how == 0 and key in wrong and key != "kind":
            del wrong[key]
        elif how == 1:
            wrong["kind"] = rng.choice(sorted(BARE_KINDS) + ["checkpoint", "import", "signer"])
        elif how == 2 and isinstance(wrong.get("headers"), list) and wrong["headers"]:
            pair = rng.choice(wrong["headers"])
            if isinstance(pair, list) and pair:
                pair[rng.randrange(len(pair))] = copy.deepcopy(rng.choice(ODD))
        elif how == 3 and isinstance(wrong.get("body"), dict):
            wrong["body"][rng.choice(["size", "sha256", "text", "base64", "blob", "other"])] = copy.deepcopy(rng.choice(ODD))
        else:
            wrong[key] = copy.deepcopy(rng.choice(ODD + [1.5, {"n": 0.25}, [[1, [2.0]]]]))
    return wrong


def test_the_bulk_check_takes_every_bare_kind():
    """A change of the schema the translation cannot follow would leave a kind to the slow reading: it
    must be noticed (and _Structs taught the change), not found in a benchmark."""
    assert bulk_schema(BARE_KINDS).kinds == BARE_KINDS


def test_the_bulk_check_is_the_plain_predicate(sessions):
    """BulkSchema.valid of a batch is what record_valid_plain says of each of its records, on the records
    of real logs and a hundred thousand mutations of them, one at a time and in batches."""
    rng = random.Random(26)
    bulk, plain = bulk_schema(BARE_KINDS), record_valid_plain()
    base = [json.loads(line) for path in sessions for line in lines_of(path)]
    base = [r for r in base if r.get("kind") in bulk.kinds]
    assert all(map(plain, base)) and bulk.valid(base, [r["kind"] for r in base])
    checked = refused = 0
    for _ in range(60_000):
        record = mutated(rng.choice(base), rng)
        kind = record.get("kind")
        if not (type(kind) is str and kind in bulk.kinds):
            continue  # not for the bulk check: _batch reads it line by line
        expected = plain(record)
        if expected and _depth(record) > OPEN_DEPTH + 1:
            expected = False   # nested deeper than the bulk check reads: left to the predicate
        assert bulk.valid([record], [kind]) == expected, record
        others = rng.sample(base, 3)
        batch = [*others[:2], record, others[2]]
        assert bulk.valid(batch, [r["kind"] for r in batch]) == expected
        checked += 1
        refused += not expected
    assert checked > 30_000 and refused > checked // 2 and checked - refused > 1000


def _depth(value) -> int:
    """How many arrays and objects deep `value` nests (a record's own fields: 1)."""
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
    return 0 if items is None else 1 + max(map(_depth, items), default=0)


def test_a_shape_matches_what_its_pattern_matches():
    rng = random.Random(1)
    root = json.loads(SCHEMA_PATH.read_text())
    patterns = sorted({node["pattern"] for node in _nodes(root) if isinstance(node, dict) and "pattern" in node})
    shaped = [p for p in patterns if _Shape.of(p) is not None]
    assert len(shaped) >= 5   # sha256, ts, method, the key and the signature
    alphabet = "0123456789abcdefABCDEFxyz-T:.Z=+/!#\n é_~٣"
    samples = ["2026-12-02T17:54:20.981951Z", "ab" * 32, "A" * 43 + "=", "B" * 86 + "==", "GET", "M-SEARCH", ""]
    for pattern in shaped:
        shape, regex = _Shape.of(pattern), ecma_regex(pattern)
        for _ in range(4000):
            values = []
            for _ in range(rng.randrange(4)):
                chars = list(rng.choice(samples))
                for _ in range(rng.randrange(3)):
                    at = rng.randrange(len(chars) + 1)
                    if rng.randrange(2) and chars:
                        chars[min(at, len(chars) - 1)] = rng.choice(alphabet)
                    else:
                        chars.insert(at, rng.choice(alphabet))
                values.append("".join(chars))
            assert shape.holds(values) == all(regex.search(v) for v in values), (pattern, values)
    for other in (r"^a|b$", r"^[^a]{2}$", r"^\d{2}$", r"^[a-z]{2,3}$", r"^[a-z]+x$", r"^[a-c][b-d]$", "^é$"):
        assert _Shape.of(other) is None, other


def _nodes(node):
    yield node
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
    for child in children:
        yield from _nodes(child)


def edited(line: bytes, rng: random.Random) -> bytes:
    """The line's record mutated and re-hashed: canonical, its hash its content's, for the schema alone to
    refuse (or accept)."""
    record = mutated(json.loads(line), rng)
    record.pop("hash", None)
    record["hash"] = record_hash(record)
    try:
        return canonical_json(record)
    except (ValueError, UnicodeEncodeError):
        return line


@pytest.mark.parametrize("batch", [1, 3, 64])
def test_batches_find_what_lines_find(sessions, tmp_path, monkeypatch, batch):
    """_chunk_facts in batches against line_facts line by line, on logs with lines damaged, edited and
    re-hashed (each then the canonical JSON of a record the schema may refuse), moved and cut short."""
    monkeypatch.setattr(verify_module, "BATCH", batch)
    rng = random.Random(batch)
    logs = 0
    outcomes = {True: 0, False: 0}
    fast_run = verify_module._fast_run

    def counted(*args):
        found = fast_run(*args)
        outcomes[found is not None] += 1
        return found
    monkeypatch.setattr(verify_module, "_fast_run", counted)
    for session in sessions:
        lines = lines_of(session)
        for n in range(12 if batch != 64 else 40):
            changed = list(lines)
            for _ in range(rng.randrange(4)):
                i = rng.randrange(len(changed))
                how = rng.randrange(6)
                if how < 4:
                    try:
                        changed[i] = (damaged if how == 0 else edited)(changed[i][:-1], rng) + b"\n"
                    except ValueError:
                        pass   # a line damaged before, no record to change
                elif how == 4:
                    changed.insert(rng.randrange(len(changed)), changed.pop(i))
                elif len(changed[-1]) > 1:
                    changed[-1] = changed[-1][: rng.randrange(1, len(changed[-1]))]
            target = tmp_path / f"{session.name}-{batch}-{n}" / session.name
            target.mkdir(parents=True)
            if (session / "blobs").is_dir():
                (target / "blobs").symlink_to(session / "blobs")
            put_lines(target, changed)
            log = target / LOG_NAME
            assert same_items(_chunk_facts(log, 0, None), reference(log)), (session.name, n)
            logs += 1
    assert logs >= 12 * len(sessions)
    assert outcomes[True] > 100 and outcomes[False] > 20, outcomes  # taken, and refused (then read line by line)


def test_a_log_read_in_batches_gives_the_verdict_of_one_read_line_by_line(sessions, tmp_path, monkeypatch):
    session = sessions[1]   # signed, every kind
    lines = lines_of(session)
    rng = random.Random(9)
    for n in range(20):
        changed = list(lines)
        i = rng.randrange(len(changed))
        changed[i] = edited(changed[i][:-1], rng) + b"\n"
        target = tmp_path / f"copy{n}" / session.name
        target.mkdir(parents=True)
        (target / "blobs").symlink_to(session / "blobs")
        put_lines(target, changed)
        monkeypatch.setattr(verify_module, "BATCH", 64)
        fast = verify(target, jobs=1)
        monkeypatch.setattr(verify_module, "BATCH", 1)
        monkeypatch.setattr(verify_module, "_fast_run", lambda *a: None)
        assert verify(target, jobs=1) == fast
        monkeypatch.undo()


def test_msgspec_takes_what_the_schema_says_and_no_more():
    """The translation's own rules, one at a time: no bool for an integer, no float anywhere, a required
    field required, no field the schema does not name, a pair is two strings."""
    bulk = bulk_schema(BARE_KINDS)
    record = {"v": 2, "seq": 0, "ts": NOW, "kind": "form", "prev": "0" * 64, "hash": "0" * 64, "flow": "f",
              "request": 0, "url": "u", "method": "POST", "enctype": "e", "fields": [["a", "b"]]}
    assert bulk.valid([record], ["form"])
    for change in ({"seq": True}, {"seq": 0.0}, {"seq": -1}, {"v": 3}, {"v": True}, {"fields": [["a", "b", "c"]]},
                   {"fields": [("a",)]}, {"extra": 1}, {"url": ""}, {"method": "P OST"}, {"ts": NOW + "\n"},
                   {"prev": "0" * 63}, {"enctype": 1}):
        assert not bulk.valid([{**record, **change}], ["form"]), change
        assert not record_valid_plain()({**record, **change}), change
    del record["enctype"]
    assert not bulk.valid([record], ["form"])
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert([record], bulk.records_type)
    assert re.compile(r"\Z").search("")  # ecma_regex's end of string, which msgspec searches with
