"""verify's C pass takes a line only when the Python reading finds it clean, and with the same facts.

`_chunk_facts` gives a chunk's lines to the C pass (proxy/linecheck.py, _linecheck.c), which reads each
line's bytes once: a strict scan for the contract's canonical JSON, the schema as msgspec's types of
`schema.bulk_schema` say it, the content hash, the Merkle leaf, the inline body's SHA-256. A line it takes
is not read by `line_facts` (the reference, which says what is wrong with a line): a line it takes that
the reference would refuse, or would read with other facts, is damage verify would miss. Here the two
are compared on real logs and on logs damaged, edited and re-hashed, shuffled and cut short; on records
mutated at random (against the schema's predicate); on the same records spelled otherwise than
canonically (whitespace, key order, escapes, number forms, duplicate keys, lone surrogates, nesting, NUL,
invalid UTF-8, truncation), which it must leave to the reference; and without the extension.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
import re
from pathlib import Path

import pytest
from capture_helpers import NOW, lines_of, put_lines
from test_verify_fast import damaged, same

from spillage.proxy import linecheck
from spillage.proxy import verify as verify_module
from spillage.proxy.capturelog import canonical_json
from spillage.proxy.capturelog import record_hash
from spillage.proxy.layout import LOG_NAME
from spillage.proxy.schema import OPEN_DEPTH
from spillage.proxy.schema import SCHEMA_PATH
from spillage.proxy.schema import _Shape
from spillage.proxy.schema import ecma_regex
from spillage.proxy.schema import record_valid_plain
from spillage.proxy.verify import BARE_KINDS
from spillage.proxy.verify import EXCHANGE_KINDS
from spillage.proxy.verify import _chunk_facts
from spillage.proxy.verify import _Runs
from spillage.proxy.verify import line_facts
from spillage.proxy.verify import verify

from test_verify_fast import sessions  # noqa: F401  (the fixture: every kind, plain and signed, and the corpus)

SCAN = linecheck.scanner(BARE_KINDS, EXCHANGE_KINDS)


def taken(line: bytes) -> tuple | None:
    """The facts the C pass gives of one line (without its newline) when it takes it, else None."""
    pos, groups = SCAN(line + b"\n", 0)
    assert (pos == len(line) + 1) == (len(groups) == 1)
    return groups[0][0] if groups else None


def clean(facts) -> bool:
    """Whether the reference's facts of a line are those of a clean line of BARE_KINDS (_Runs.line)."""
    return (isinstance(facts, tuple) and facts[4] is None and type(facts[5]) is str and facts[5] == facts[2]
            and facts[6] is None and facts[7] is None and type(facts[0]) is int)


def rehashed(record: dict) -> bytes | None:
    """The canonical line of `record` with its hash its content's (None for a record that has none)."""
    record = {k: v for k, v in record.items() if k != "hash"}
    try:
        record["hash"] = record_hash(record)
        return canonical_json(record)
    except (ValueError, UnicodeEncodeError):
        return None


def test_the_extension_is_built():
    """make test installs the package with it (setup.py); without it verify is correct and slow."""
    assert linecheck._linecheck is not None and SCAN is not None


def test_the_c_pass_takes_every_bare_kind_and_checks_every_field_but_base64():
    """A change of the schema the translation cannot follow would leave a kind to Python: it must be
    noticed (and linecheck taught the change), not found in a benchmark."""
    program = linecheck.program(BARE_KINDS, EXCHANGE_KINDS)
    assert {kind for kind, _, _ in program} == BARE_KINDS
    assert {kind for kind, _, exchange in program if exchange} == EXCHANGE_KINDS

    def unchecked(node, at):
        if node[0] == "unchecked":
            yield at
        for part in node[1:]:
            if isinstance(part, tuple) and part and isinstance(part[0], str):
                yield from unchecked(part, at)
            elif isinstance(part, tuple):
                for item in part:
                    if isinstance(item, tuple) and len(item) == 3 and isinstance(item[0], bytes):
                        yield from unchecked(item[1], (*at, item[0]))
                    elif isinstance(item, tuple) and item and isinstance(item[0], str):
                        yield from unchecked(item, at)
    found = {path for kind, node, _ in program for path in unchecked(node, (kind,))}
    assert found == {(kind, b"body", b"base64") for kind in EXCHANGE_KINDS}


def reference(log: Path) -> list:
    """What _chunk_facts stands for: each line's line_facts, in order, merged into runs, up to the first
    line that holds no record."""
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


def test_the_c_pass_takes_what_the_python_reading_finds_clean(sessions, tmp_path):
    """Records of real logs mutated at random and re-hashed, so that only the schema (or a body) can
    refuse them: the C pass takes exactly the lines line_facts finds clean, with its facts, but for what
    it leaves to Python by design (_left_to_python)."""
    rng = random.Random(26)
    plain = record_valid_plain()
    base = [json.loads(line) for path in sessions for line in lines_of(path)]
    base = [r for r in base if r.get("kind") in BARE_KINDS]
    assert all(map(plain, base))
    assert all(taken(canonical_json(r)) for r in base if not _left_to_python(r))
    checked = refused = left = 0
    for _ in range(60_000):
        record = mutated(rng.choice(base), rng)
        line = rehashed(record)
        if line is None:
            continue
        facts = line_facts(line + b"\n", lambda: False, tmp_path)
        got = taken(line)
        if got is not None:
            assert clean(facts) and same(got, facts), line
        elif clean(facts):
            assert _left_to_python(json.loads(line)), line
            left += 1
        checked += 1
        refused += not clean(facts)
    assert checked > 50_000 and refused > checked // 2 and checked - refused > 1000 and left > 20


def _left_to_python(record: dict) -> bool:
    """Whether a clean record holds what the C pass leaves to Python by design: a body in a blob or in
    base64, a float, an integer of 19 digits or more, a key with an escape, nesting deeper than msgspec's
    types read."""
    body = record.get("body")
    return isinstance(body, dict) and "text" not in body or _unusual(record, 0)


def _unusual(value, depth: int) -> bool:
    if type(value) is float or type(value) is int and abs(value) >= 10**18:
        return True
    if isinstance(value, (dict, list)) and depth > OPEN_DEPTH + 1:
        return True
    if isinstance(value, dict):
        return any(re.search(r'[\x00-\x1f"\\]', key) or _unusual(v, depth + 1) for key, v in value.items())
    return isinstance(value, list) and any(_unusual(v, depth + 1) for v in value)


def test_a_shape_takes_what_its_pattern_matches():
    """The patterns of the bare kinds' fields, as the C pass matches them (_Shape: a template, or a run of
    members), against the regular expressions they stand for, on strings mutated at random."""
    rng = random.Random(1)
    root = json.loads(SCHEMA_PATH.read_text())
    defs = root["$defs"]
    record = {"v": 2, "seq": 0, "ts": NOW, "kind": "form", "prev": "0" * 64, "flow": "f", "request": 0,
              "url": "u", "method": "POST", "enctype": "e", "fields": [["a", "b"]]}
    alphabet = "0123456789abcdefABCDEFxyz-T:.Z=+/!#\n é_~٣\"\\"
    checked = 0
    for field, pattern in (("ts", defs["ts"]["pattern"]), ("prev", defs["sha256"]["pattern"]),
                           ("method", defs["method"]["pattern"])):
        regex = ecma_regex(pattern)
        assert _Shape.of(pattern) is not None
        for _ in range(3000):
            chars = list(record[field])
            for _ in range(rng.randrange(3)):
                at = rng.randrange(len(chars) + 1)
                if rng.randrange(2) and chars:
                    chars[min(at, len(chars) - 1)] = rng.choice(alphabet)
                else:
                    chars.insert(at, rng.choice(alphabet))
            value = "".join(chars)
            line = rehashed({**record, field: value})
            assert (taken(line) is not None) == bool(regex.search(value)), (field, value)
            checked += 1
    assert checked == 9000
    for other in (r"^a|b$", r"^[^a]{2}$", r"^\d{2}$", r"^[a-z]{2,3}$", r"^[a-z]+x$", r"^[a-c][b-d]$", "^é$"):
        assert _Shape.of(other) is None, other


def edited(line: bytes, rng: random.Random) -> bytes:
    """The line's record mutated and re-hashed: canonical, its hash its content's, for the schema alone to
    refuse (or accept)."""
    return rehashed(mutated(json.loads(line), rng)) or line


@pytest.mark.parametrize("chunk, extension", [(8 << 20, True), (4096, True), (1, True), (8 << 20, False)])
def test_chunks_find_what_lines_find(sessions, tmp_path, monkeypatch, chunk, extension):
    """_chunk_facts (the chunk read at once, the line its end cuts read after it; with the C pass or
    without the extension) against line_facts line by line, on logs with lines damaged, edited and
    re-hashed (each then the canonical JSON of a record the schema may refuse), moved and cut short."""
    monkeypatch.setattr(verify_module, "CHUNK_BYTES", chunk)
    outcomes = {"taken": 0, "left": 0}

    def counted(data, pos):
        found, groups = SCAN(data, pos)
        outcomes["taken"] += sum(group[2] + 1 for group in groups)
        outcomes["left"] += found < len(data)
        return found, groups
    monkeypatch.setattr(verify_module, "_scanner", lambda: counted if extension else None)
    rng = random.Random(chunk)
    logs = 0
    for session in sessions:
        lines = lines_of(session)
        for n in range(12):
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
            target = tmp_path / f"{session.name}-{n}" / session.name
            target.mkdir(parents=True)
            if (session / "blobs").is_dir():
                (target / "blobs").symlink_to(session / "blobs")
            put_lines(target, changed)
            log = target / LOG_NAME
            assert same_items(_chunk_facts(log, 0, None), reference(log)), (session.name, n)
            logs += 1
    assert logs == 12 * len(sessions)
    if extension:
        assert outcomes["taken"] > 1000 and outcomes["left"] > 100, outcomes
    else:
        assert outcomes == {"taken": 0, "left": 0}


def test_a_log_read_by_the_c_pass_gives_the_verdict_of_one_read_without_it(sessions, tmp_path, monkeypatch):
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
        fast = verify(target, jobs=1)
        monkeypatch.setattr(verify_module, "_scanner", lambda: None)
        assert verify(target, jobs=1) == fast
        monkeypatch.undo()


def test_the_c_pass_takes_what_the_schema_says_and_no_more():
    """The translation's own rules, one at a time: no bool for an integer, no float anywhere, a required
    field required, no field the schema does not name, a pair is two strings."""
    record = {"v": 2, "seq": 0, "ts": NOW, "kind": "form", "prev": "0" * 64, "flow": "f",
              "request": 0, "url": "u", "method": "POST", "enctype": "e", "fields": [["a", "b"]]}
    assert taken(rehashed(record))
    for change in ({"seq": True}, {"seq": 0.0}, {"seq": -1}, {"v": 3}, {"v": True}, {"fields": [["a", "b", "c"]]},
                   {"fields": [("a",)]}, {"extra": 1}, {"url": ""}, {"method": "P OST"}, {"ts": NOW + "\n"},
                   {"prev": "0" * 63}, {"enctype": 1}, {"kind": "checkpoint"}, {"fields": {"a": "b"}}):
        assert not taken(rehashed({**record, **change})), change
        assert not record_valid_plain()({**record, **change}), change
    assert not taken(rehashed({k: v for k, v in record.items() if k != "enctype"}))
    body = {"size": 1, "sha256": "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb", "text": "a"}
    request = {**record, "kind": "request", "http_version": "HTTP/1.1", "headers": [], "body": body}
    del request["request"], request["enctype"], request["fields"]
    assert taken(rehashed(request))
    for wrong in ({"size": 2}, {"text": "b"}, {"blob": True}, {"sha256": "CA" + body["sha256"][2:]}):
        assert not taken(rehashed({**request, "body": {**body, **wrong}})), wrong


def spellings(record: dict, text: str) -> list[bytes]:
    """The record written otherwise than canonically, its string field `text` among others, and ways a
    line stops being JSON or UTF-8."""
    line = canonical_json(record)
    member = b'"%s":"' % text.encode()
    out = [json.dumps(record, sort_keys=True).encode(), b" " + line, line + b" ", line + b"\r", b"\xef\xbb\xbf" + line,
           json.dumps(dict(reversed(record.items())), separators=(",", ":"), ensure_ascii=False).encode(),
           line.replace(b"/", b"\\/", 1), line.replace(b'"v":2', b'"v":2.0'), line.replace(b'"v":2', b'"v":2e0'),
           line.replace(b'"v":2', b'"v":02'), line.replace(b'"v":2', b'"v":+2'), line.replace(b'"seq":', b'"seq":-0*', 1),
           line.replace(b'"v":2', b'"v":2,"v":2'), line.replace(b'"ts":', b'"ts":"x","ts":', 1), line[:-1] + b',}',
           line.replace(b'"v":2', b'"v":true').replace(b"true", b"True"), line[:-1], line[1:], line[: len(line) // 2]]
    for spelled in ("é", "\x00", "\x1f", "\u2028", "\U0001f600", "\x7f"):
        changed = canonical_json({**record, text: record[text] + spelled})
        ascii_ = json.dumps({**record, text: record[text] + spelled}, sort_keys=True, separators=(",", ":")).encode()
        out += [ascii_, ascii_.replace(b"\\u00", b"\\U00", 1), changed.replace(b"\\u001f", b"\\u001F")]
    for escaped in (b"\\ud800", b"\\udfff", b"\\ud83d\\ude00", b"\\u0041", b"\\u000a", b"\\x41", b"\\", b"\\U0041"):
        out.append(line.replace(member, member + escaped, 1))
    for raw in (b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xff", b"\xc0\x80", b"\xe0\x80\x80", b"\xf4\x90\x80\x80",
                b"\xc3", b"\x80", b"\x00", b"\t", b"\xf0\x9f\x98"):
        out.append(line.replace(member, member + raw, 1))
    return [spelled for spelled in out if not _canonical(spelled)]


def _canonical(line: bytes) -> bool:
    try:
        return canonical_json(json.loads(line)) == line
    except (ValueError, UnicodeEncodeError):
        return False


def left_by_design(record: dict) -> list[bytes]:
    """Canonical lines of the record changed to hold what the C pass leaves to Python (_left_to_python)."""
    values = [[[[[[[[["deep"]]]]]]]], json.loads("[" * 80 + "]" * 80), {"a\nb": 1}, {'a"b': 1}, {"n": 2**64},
              {"n": -10**18}, {"x": 1.5}, 1e16]
    if record["kind"] != "beacon":
        return [canonical_json({**record, "body": {"size": 1, "sha256": "ab" * 32, "blob": True}})]
    return [canonical_json({**record, "data": value}) for value in values]


def test_a_line_not_written_canonically_is_left_to_the_python_reading(sessions, tmp_path):
    """Each spelling, and each canonical line of what the C pass leaves to Python by design, hashed both
    ways a forger might (its canonical content's hash, which the Python reading accepts, and the hash of
    its own bytes): the C pass takes none of them, and reading a log of it gives the facts line_facts
    gives. The canonical lines of the same records, and one whose text holds a NUL, which canonical JSON
    escapes, it takes."""
    records = {}
    for session in sessions[:2]:
        for line in lines_of(session):
            record = json.loads(line)
            records.setdefault(record["kind"], record)
    assert set(records) >= BARE_KINDS
    checked = accepted = 0
    for kind in sorted(BARE_KINDS):
        record = records[kind]
        text = next(name for name in ("url", "message", "reason") if name in record)
        assert taken(rehashed(record)) and taken(rehashed({**record, text: "a\x00b"}))
        for spelled in spellings(record, text) + left_by_design(record):
            content = re.sub(rb',"hash":"[0-9a-f]{64}"', b"", spelled, count=1)
            own = hashlib.sha256(content).hexdigest().encode()
            for line in (spelled, re.sub(rb'"hash":"[0-9a-f]{64}"', b'"hash":"' + own + b'"', spelled, count=1)):
                assert taken(line) is None, line
                facts = line_facts(line + b"\n", lambda: False, tmp_path)
                accepted += clean(facts)
                log = tmp_path / f"{checked}" / LOG_NAME
                log.parent.mkdir()
                log.write_bytes(line + b"\n")
                assert same_items(_chunk_facts(log, 0, None), reference(log)), line
                checked += 1
    assert checked > 500 and accepted > 20   # the Python reading takes some: their canonical content is hashed


