"""`proxy/schema.py` compiles capture.schema.json into checks that agree with jsonschema, an
implementation nobody here wrote, and `verify` refuses a well-chained record that breaks the schema."""

from __future__ import annotations

import copy
import json
import random

import jsonschema
import pytest
from capture_helpers import lines_of, put_lines, write_session

from spillage.proxy.capturelog import canonical_json
from spillage.proxy.capturelog import iter_records
from spillage.proxy.capturelog import record_hash
from spillage.proxy.schema import SCHEMA_PATH
from spillage.proxy.schema import SchemaError
from spillage.proxy.schema import _Compiler
from spillage.proxy.schema import schema_problem
from spillage.proxy.signing import SessionKey
from spillage.proxy.signing import load_or_create_key
from spillage.proxy.verify import verify

REFERENCE = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> list[dict]:
    """Every kind of record, from an unsigned and a signed log."""
    tmp = tmp_path_factory.mktemp("logs")
    write_session(tmp / "plain")
    signing = SessionKey.issue(load_or_create_key(tmp / "home"), "signed", "2026-12-01T00:00:00.000000Z")
    write_session(tmp / "signed", signing=signing, checkpoint_every=3)
    return [line.record for name in ("plain", "signed") for line in iter_records(tmp / name)]


def mutations(record: dict, rng: random.Random):
    """Ways a record can be wrong: a field dropped, retyped, emptied, added, a nested value broken."""
    for key in record:
        yield {k: v for k, v in record.items() if k != key}
        for value in (None, "", -1, 1.5, True, [], {}, "x" * 3, [["a"]], {"size": 0}):
            yield {**record, key: value}
    yield {**record, "unknown": 1}
    for kind in ("request", "import", "checkpoint", "signer", "form", "crash_seal", "nonsense"):
        yield {**record, "kind": kind}
    deep = copy.deepcopy(record)
    for key, value in deep.items():
        if isinstance(value, dict) and value:
            value[rng.choice(list(value))] = rng.choice([None, -5, "q", [1]])
        elif isinstance(value, list) and value:
            value.append(rng.choice([1, None, ["a"], ["a", "b", "c"]]))
    yield deep


def test_the_compiled_schema_agrees_with_jsonschema(records):
    rng = random.Random(7)
    checked = disagree = 0
    for record in records:
        assert schema_problem(record) is None and REFERENCE.is_valid(record), record["kind"]
        for wrong in mutations(record, rng):
            checked += 1
            if (schema_problem(wrong) is None) != REFERENCE.is_valid(wrong):
                disagree += 1
    assert checked > 3000 and disagree == 0


def test_a_keyword_it_does_not_know_is_refused():
    with pytest.raises(SchemaError, match="not supported: multipleOf"):
        _Compiler({}).node({"type": "integer", "multipleOf": 2})


def test_verify_refuses_a_well_chained_record_that_breaks_the_schema(tmp_path):
    write_session(tmp_path / "s")
    lines = lines_of(tmp_path / "s")
    record = json.loads(lines[1])
    record["status_code"] = 200          # a field no request has; re-chained, so only the schema sees it
    record["hash"] = record_hash(record)
    following = json.loads(lines[2])
    following["prev"] = record["hash"]
    following["hash"] = record_hash(following)
    rest = []
    prev = following["hash"]
    for line in lines[3:]:
        r = json.loads(line)
        r["prev"] = prev
        r["hash"] = record_hash(r)
        prev = r["hash"]
        rest.append(canonical_json(r) + b"\n")
    put_lines(tmp_path / "s", [lines[0], canonical_json(record) + b"\n", canonical_json(following) + b"\n", *rest])
    result = verify(tmp_path / "s")
    assert (result.damage, result.line) == ("malformed", 2)
    assert "record: status_code is not allowed" in result.message
