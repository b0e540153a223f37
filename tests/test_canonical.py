"""The writer's bytes are the contract's canonical JSON, byte for byte.

`canonical_json` encodes with orjson when the value is plain (`_plain`) and the writer encodes each
record once, in two halves spliced around its `hash`. Both must give exactly the bytes the contract
names (docs/CAPTURE_FORMAT.md): `json.dumps(r, sort_keys=True, separators=(",", ":"),
ensure_ascii=False, allow_nan=False)` in UTF-8, with `hash` the SHA-256 of that encoding of the record
without `hash`. Here the same records go through the contract's encoding (the code as it was) and the
new path, over every record kind, real sessions, and hostile values.
"""

from __future__ import annotations

import enum
import glob
import hashlib
import json
import random
import sys
from collections import OrderedDict
from pathlib import Path

import pytest
from capture_helpers import NOW, lines_of, write_session

from spillage.proxy.capturelog import CaptureWriter
from spillage.proxy.capturelog import _plain
from spillage.proxy.capturelog import canonical_json
from spillage.proxy.capturelog import iter_records
from spillage.proxy.capturelog import record_hash
from spillage.proxy.capturelog import splice
from spillage.proxy.signing import SessionKey
from spillage.proxy.signing import load_or_create_key

ROOT = Path(__file__).resolve().parent.parent


def contract_json(obj) -> bytes:
    """The canonical JSON as the contract defines it (and as the writer wrote it before orjson)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def contract_line(record: dict) -> bytes:
    """The line the writer wrote for `record` before: the hash of the record without it, then the whole."""
    content = {k: v for k, v in record.items() if k != "hash"}
    with_hash = {**content, "hash": hashlib.sha256(contract_json(content)).hexdigest()}
    return contract_json(with_hash)


def same_outcome(obj) -> bytes | type:
    """canonical_json(obj) and contract_json(obj) agree: the same bytes, or the same exception type."""
    try:
        expected = contract_json(obj)
    except Exception as exc:  # noqa: BLE001 - compared below
        with pytest.raises(type(exc)):
            canonical_json(obj)
        return type(exc)
    assert canonical_json(obj) == expected, obj
    return expected


# --- hostile values --------------------------------------------------------------------------------

SURROGATES = ["\ud800", "\udfff", "\udc80", "a\ud83db", "\ude00\ud83d"]
CONTROL = "".join(map(chr, range(0x20))) + "\x7f\x80\x9f\xa0\xad"
AWKWARD = ['"', "\\", "/", "\\u0000", "\u2028", "\u2029", "\ufeff", "\ufffe", "\uffff", "\U00010000",
           "\U0010ffff", "😀", "e\u0301", "𝄞", "Zoë", "血糖仪", "<script>\"'&</script>", "%C3%A4", "\r\n\t"]
INTEGERS = [0, 1, -1, 2**31, -2**31, 2**53 + 1, 2**63 - 1, 2**63, -2**63, -2**63 - 1, 2**64 - 1, 2**64,
            10**30, -10**30, 10**400]
FLOATS = [0.0, -0.0, 0.1, 1.0, -1.5, 1e-5, 1e-7, 1.5e-10, 1e15, 1e16, 1e17, 1e22, 1e-300, 5e-324,
          1.7976931348623157e308, 123456.789, 2.5e-5, 3.14159, float("nan"), float("inf"), float("-inf")]


class Colour(enum.IntEnum):
    RED = 1


class Name(str):
    pass


def hostile_values(rng: random.Random) -> list:
    values: list = [None, True, False, "", [], {}, (), [[]], {"": ""}, ("a", 1), CONTROL, *AWKWARD,
                    *SURROGATES, *INTEGERS, *FLOATS, Colour.RED, Name("x"), OrderedDict(b=1, a=2),
                    {1: "int key"}, {"a": {1, 2}}, b"bytes", {"k": object()}]
    for _ in range(300):  # random text over the whole of Unicode, surrogates included now and then
        text = "".join(chr(rng.choice([rng.randrange(0x80), rng.randrange(0x800), rng.randrange(0x10000),
                                       rng.randrange(0x110000)])) for _ in range(rng.randrange(12)))
        values += [text, {text: text}, [text, rng.choice(INTEGERS), rng.choice(FLOATS[:-3])]]
    return values


def test_every_code_point_but_the_surrogates_encodes_as_the_contract_says():
    points = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    for start in range(0, len(points), 4096):
        chunk = points[start:start + 4096]
        assert same_outcome("".join(chunk)) == contract_json("".join(chunk))
        assert same_outcome(chunk) == contract_json(chunk)
        assert same_outcome(dict.fromkeys(chunk, 0)) == contract_json(dict.fromkeys(chunk, 0))  # key order too


@pytest.mark.parametrize("surrogate", SURROGATES)
def test_a_lone_surrogate_has_no_canonical_encoding_either_way(surrogate):
    for value in (surrogate, {"k": surrogate}, {surrogate: 1}, [surrogate]):
        assert same_outcome(value) is UnicodeEncodeError


def test_hostile_values_encode_alike_or_fail_alike():
    rng = random.Random(20261201)
    outcomes = [same_outcome(value) for value in hostile_values(rng)]
    assert UnicodeEncodeError in outcomes and ValueError in outcomes and TypeError in outcomes
    for value in hostile_values(rng):  # nested in a record the way a beacon's data is
        same_outcome({"kind": "beacon", "data": {"x": value, "list": [value, {"y": value}]}, "v": 2})


def test_floats_and_big_integers_are_left_to_the_standard_library():
    assert not _plain(1e-7) and not _plain({"a": [2**64]}) and not _plain([-2**63 - 1])
    assert _plain({"a": [2**64 - 1, -2**63, True, None, "x", ("t",)]})
    assert canonical_json({"f": 1e-7, "g": 1e16}) == b'{"f":1e-07,"g":1e+16}'  # orjson would write 1e-7


def test_deep_nesting_encodes_or_fails_as_before():
    for depth in (10, 200, 300, 600):
        value: object = "leaf"
        for _ in range(depth):
            value = {"a": [value]}
        same_outcome(value)
    outcomes = set()
    for depth in (sys.getrecursionlimit() + 100, 20_000, 200_000):
        value = "leaf"
        for _ in range(depth):
            value = [value]
        outcomes.add(same_outcome(value))
    assert RecursionError in outcomes


def test_random_keys_sort_the_same():
    rng = random.Random(7)
    alphabet = ["a", "b", "hash", "z", "é", "\uffff", "\ue000", "\U00010000", "\U0001f600", "\x00", "~", "Z"]
    for _ in range(2000):
        obj = {"".join(rng.choices(alphabet, k=rng.randrange(1, 4))): rng.randrange(9) for _ in range(rng.randrange(8))}
        same_outcome(obj)


def test_splicing_two_halves_is_encoding_the_whole():
    rng = random.Random(11)
    keys = ["a", "body", "data", "flow", "ha", "hash", "hasha", "head", "headers", "kind", "v", "é", "\U0001f600"]
    for _ in range(3000):
        obj = {k: rng.choice([1, "x", None, [1, "é"], {"n": 1.5}, 2**70]) for k in rng.sample(keys, rng.randrange(len(keys)))}
        obj.pop("hash", None)
        head = {k: v for k, v in obj.items() if k < "hash"}
        tail = {k: v for k, v in obj.items() if k > "hash"}
        member = b'"hash":' + contract_json("f" * 64)
        assert splice(canonical_json(head), canonical_json(tail)) == contract_json(obj)
        assert splice(canonical_json(head), canonical_json(tail), member) == contract_json({**obj, "hash": "f" * 64})


# --- records: every kind, real sessions, the writer's lines -----------------------------------------


def corpus_records() -> list[dict]:
    paths = sorted(glob.glob(str(ROOT / "tests/corpus/sessions/*"))) + sorted(glob.glob(str(ROOT / "runs/*")))
    return [line.record for path in paths if (Path(path) / "capture.jsonl").is_file()
            for line in iter_records(path)]


def test_every_real_record_hashes_and_encodes_as_the_contract_says():
    records = corpus_records()
    assert {r["kind"] for r in records} >= {"request", "response", "beacon", "form", "egress_blocked",
                                            "session_start", "session_end"}
    for record in records:
        assert canonical_json(record) == contract_json(record)
        assert record_hash(record) == hashlib.sha256(contract_json({k: v for k, v in record.items()
                                                                   if k != "hash"})).hexdigest()


def test_the_writer_writes_the_contract_bytes_for_every_kind(tmp_path):
    signing = SessionKey.issue(load_or_create_key(tmp_path / "home"), "signed", NOW)
    for name, kw in (("plain", {}), ("signed", {"signing": signing, "checkpoint_every": 3})):
        write_session(tmp_path / name, **kw)
        lines = lines_of(tmp_path / name)
        records = [json.loads(line) for line in lines]
        kinds = {r["kind"] for r in records}
        assert kinds >= {"session_start", "request", "response", "beacon", "form", "egress_blocked", "error",
                         "import", "session_end"} | ({"signer", "checkpoint"} if kw else set())
        for line, record in zip(lines, records):
            assert line == contract_line(record) + b"\n", record["kind"]


def hostile_fields(rng: random.Random, value) -> dict[str, dict]:
    """Fields of each kind a caller may pass, carrying `value` where the kind has room for it."""
    text = value if isinstance(value, str) else json.dumps(value, default=repr)
    return {
        "session_start": {"session": "s", "tool": {"name": text, "version": "0", "mitmproxy": "12"},
                          "options": {"x": value, text: [value]}},
        "request": {"flow": text or "f", "method": "GET", "url": "http://shop.test/?" + text, "http_version": "HTTP/1.1",
                    "headers": [["X-" + text, text], ["Host", "shop.test"]], "body": None},
        "response": {"flow": "f", "request": 0, "status": 200, "reason": text, "http_version": "HTTP/2.0",
                     "headers": [[text, text]], "body": {"size": 3, "sha256": "0" * 64, "text": text}},
        "beacon": {"flow": "f", "request": 1, "url": "http://metrics.test/collect", "event": text,
                   "data": {"v": value, "n": [value, {"deep": value}], text: rng.random()}},
        "form": {"flow": "f", "request": 1, "url": "u", "method": "POST", "enctype": "multipart/form-data",
                 "fields": [[text, text]]},
        "egress_blocked": {"flow": "f", "method": "CONNECT", "url": "x:1", "host": "x", "port": 1,
                           "background": False, "headers": [], "body": None, "reason": text or "r"},
        "error": {"flow": None, "request": None, "message": text},
        "import": {"format": "har", "file": text or "f", "size": 1, "sha256": "ab" * 32,
                   "counts": {text: 1, "requests": 2**40}, "lacks": [text]},
        "crash_seal": {"reason": text or "r", "records": None, "by": {"tool": "spillage", "user": text, "pid": 1},
                       "last_signed": 0, "torn_tail": {"file": "capture.torn", "size": 1, "sha256": "cd" * 32}},
        "session_end": {"reason": text or "r", "records": None},
    }


def test_the_writer_writes_the_contract_bytes_for_hostile_records(tmp_path):
    rng = random.Random(3)
    signing = SessionKey.issue(load_or_create_key(tmp_path / "home"), "hostile", NOW)
    values = hostile_values(rng)
    refused = written = 0
    for n, kind in enumerate(("session_start", "request", "response", "beacon", "form", "egress_blocked",
                              "error", "import", "crash_seal", "session_end")):
        session = tmp_path / f"{n}-{kind}"
        with CaptureWriter(session, signing=signing, checkpoint_every=5, checkpoint_interval=3600) as w:
            for value in values:
                fields = hostile_fields(rng, value)[kind]
                if "records" in fields:
                    fields["records"] = w.count
                try:
                    contract_line({"v": 2, "seq": w.count, "ts": NOW, "kind": kind, "prev": w.head, **fields})
                except Exception as exc:  # noqa: BLE001 - the writer must refuse it the same way
                    with pytest.raises(type(exc)):
                        w.append(kind, **fields)
                    refused += 1
                    continue
                w.append(kind, **fields)
                written += 1
                if kind in ("crash_seal", "session_end"):
                    break
        for line in lines_of(session):
            record = json.loads(line)
            assert line == contract_line(record) + b"\n", (kind, record)
    assert refused > 50 and written > 1000
