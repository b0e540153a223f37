"""verify's fast paths find what the plain reading finds, line for line.

`verify` reads a canonical line with orjson (capturelog.canonical_record), asks a compiled predicate
(schema.record_valid) before the closures that say why, checks inline text bodies directly, and for
a long log hands chunks of lines to worker processes. Here each shortcut is compared with the way the
line was read before (read_line, record_hash, _check_body, the schema closures) on real and damaged
lines, and verify with workers and chunks of every size with verify alone.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
from pathlib import Path

import pytest
from capture_helpers import NOW, lines_of, put_lines, write_session

from spillage.proxy import verify as verify_module
from spillage.proxy.capturelog import CaptureError
from spillage.proxy.capturelog import canonical_json
from spillage.proxy.capturelog import canonical_record
from spillage.proxy.capturelog import read_line
from spillage.proxy.capturelog import record_hash
from spillage.proxy.layout import LOG_NAME
from spillage.proxy.schema import KEYWORDS
from spillage.proxy.schema import _Compiler
from spillage.proxy.schema import record_check
from spillage.proxy.schema import record_valid
from spillage.proxy.schema import record_valid_plain
from spillage.proxy.signing import SessionKey
from spillage.proxy.signing import load_or_create_key
from spillage.proxy.verify import BARE_KINDS
from spillage.proxy.verify import _check_body
from spillage.proxy.verify import line_facts
from spillage.proxy.verify import verify

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def sessions(tmp_path_factory) -> list[Path]:
    """A log with every kind (plain and signed), and the real sessions of the corpus."""
    tmp = tmp_path_factory.mktemp("logs")
    write_session(tmp / "plain")
    signing = SessionKey.issue(load_or_create_key(tmp / "home"), "signed", NOW)
    write_session(tmp / "signed", signing=signing, checkpoint_every=3)
    corpus = sorted(p for p in (ROOT / "tests/corpus/sessions").iterdir() if (p / LOG_NAME).is_file())
    return [tmp / "plain", tmp / "signed", *corpus]


def plain_facts(raw: bytes, at_end: bool, session: Path) -> tuple | CaptureError:
    """line_facts as the line was read before: the standard library's JSON, record_hash, _check_body and
    the schema's closures, each raising what it raises."""
    try:
        rec = read_line(raw, lambda: at_end)
    except CaptureError as exc:
        return exc

    def outcome(check, *args):
        try:
            return check(*args)
        except Exception as exc:  # noqa: BLE001 - compared by type and message
            return exc

    own = outcome(record_hash, rec)
    kind = rec.get("kind")
    return (rec.get("seq"), kind, rec.get("hash"), rec.get("prev"),
            None if type(kind) is str and kind in BARE_KINDS else rec,
            None if isinstance(own, UnicodeEncodeError) else own,
            outcome(_check_body, session, rec.get("body")), outcome(record_check(), rec, "record"),
            hashlib.sha256(b"\x00" + raw[:-1]).digest())


def same(a, b) -> bool:
    if isinstance(a, BaseException) or isinstance(b, BaseException):
        return type(a) is type(b) and str(a) == str(b)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(map(same, a, b))
    return a == b and type(a) is type(b)


def damaged(line: bytes, rng: random.Random) -> bytes:
    """One line changed the ways a forger or a disk would: a flipped byte, a value edited with or without
    re-hashing, the same record written otherwise (spaces, key order, escapes, a duplicate key, -0, a
    float as orjson writes it), a lone surrogate."""
    how = rng.randrange(12)
    text = line.decode("utf-8", "replace")
    record = json.loads(line)
    if how == 0:
        data = bytearray(line)
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        return bytes(data)
    if how == 1:
        return json.dumps(record, sort_keys=True).encode()  # spaces
    if how == 2:
        return json.dumps(dict(reversed(record.items())), separators=(",", ":"), ensure_ascii=False).encode()
    if how == 3:
        return json.dumps(record, sort_keys=True, separators=(",", ":")).encode()  # \u escapes
    if how == 4:
        return line.replace(b"/", b"\\/", 1)
    if how == 5:
        return line[:-1] + b',"seq":' + str(record.get("seq")).encode() + b"}"  # a duplicate key
    if how == 6:
        record["x-0"] = 0
        record["hash"] = record_hash(record)
        return canonical_json(record).replace(b'"x-0":0', b'"x-0":-0')
    if how == 7:  # a float the way orjson writes it, hashed the way orjson would
        record["data"] = {"tiny": 1e-7}
        body = {k: v for k, v in record.items() if k != "hash"}
        wrong = canonical_json(body).replace(b"1e-07", b"1e-7")
        record["hash"] = hashlib.sha256(wrong).hexdigest()
        return canonical_json(record).replace(b"1e-07", b"1e-7")
    if how == 8:  # a big integer, re-hashed
        record["seq"] = 2**70
        record["hash"] = record_hash(record)
        return canonical_json(record)
    if how == 9:  # a lone surrogate, escaped
        return text.replace('"kind":"', '"kind":"\\ud800', 1).encode()
    if how == 10:  # an edit, re-hashed: only the chain or the schema tells
        for key in ("url", "status", "message", "reason", "event", "ts"):
            if key in record:
                record[key] = (record[key] + 1) if isinstance(record[key], int) else str(record[key]) + "\u2028x"
                break
        record["hash"] = record_hash(record)
        return canonical_json(record)
    return line[: rng.randrange(1, len(line))]  # cut short


def test_every_line_gives_the_facts_it_gave_before(sessions):
    rng = random.Random(20261201)
    checked = fast = 0
    for session in sessions:
        for raw in lines_of(session):
            for candidate in [raw] + [damaged(raw[:-1], rng) + b"\n" for _ in range(6)]:
                for at_end in (False, True):
                    got = line_facts(candidate, lambda: at_end, session)
                    assert same(got, plain_facts(candidate, at_end, session)), candidate[:200]
                    checked += 1
            fast += canonical_record(raw[:-1]) is not None
    assert checked > 10_000 and fast == sum(len(lines_of(s)) for s in sessions)


def test_a_canonical_line_is_read_fast_and_nothing_else_is():
    record = {"v": 2, "kind": "beacon", "data": {"hash": "x", "n": [1, "é", None, True]}, "hash": "ab" * 32}
    line = canonical_json(record)
    assert canonical_record(line) == (record, record_hash(record))
    assert canonical_record(canonical_json({**record, "hash": {"hash": 1}})) is not None
    nested = {**record, "data": {"hash": "ab" * 32}}  # its own member twice: read the slow way
    assert canonical_record(canonical_json(nested)) is None
    for other in (b" " + line, line.replace(b":", b": ", 1), line.replace(b"\xc3\xa9", b"\\u00e9"),
                  line[:-1] + b',"v":2}', canonical_json({**record, "f": 1.5}), b"[1]", b"{", b"\xff"):
        assert canonical_record(other) is None, other


def test_the_predicate_agrees_with_the_closures(sessions):
    rng = random.Random(5)
    check, valid = record_check(), record_valid()
    base = [json.loads(line) for path in sessions[:6] for line in lines_of(path)]
    values = [None, "", "x", -1, 0, 2**70, 1.5, float("nan"), True, [], {}, [["a", "b"]], [["a"]], ["a", 1],
              {"size": 1, "sha256": "ab" * 32, "text": "t"}, {"size": 1, "sha256": "ab" * 32, "blob": True},
              {"size": 1, "sha256": "AB" * 32, "base64": "AA=="}, "ab" * 32, "ab" * 32 + "\n", [[]]]
    checked = 0
    for record in base:
        assert valid(record) and check(record, "record") is None
        for _ in range(40):
            wrong = copy.deepcopy(record)
            for _ in range(rng.randrange(1, 3)):
                key = rng.choice([*wrong, "kind", "unknown", "body", "headers"])
                wrong[key] = rng.choice(values + [rng.choice(["request", "response", "beacon", "import",
                                                              "checkpoint", "crash_seal", "form"])])
            assert valid(wrong) == (check(wrong, "record") is None), wrong
            checked += 1
    assert checked > 2000
    for odd in ([], "record", None, 1, {"kind": ["unhashable"]}):
        assert valid(odd) == (check(odd, "record") is None)


def test_the_plain_predicate_is_the_predicate_and_no_float_anywhere(sessions):
    """verify trusts record_valid_plain in place of two answers (the schema holds; no float, so the line's
    own bytes are its canonical JSON): a float anywhere, valid or not where it lies, must make it False."""
    from spillage.proxy.capturelog import _float_free

    rng = random.Random(7)
    valid, plain = record_valid(), record_valid_plain()
    base = [json.loads(line) for path in sessions[:6] for line in lines_of(path)]

    def places(value, at=()):
        yield at
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, item in items:
            yield from places(item, (*at, key))

    checked = floats = 0
    for record in rng.sample(base, min(len(base), 300)):
        assert plain(record) == (valid(record) and _float_free(record))
        for at in list(places(record))[1:]:
            for value in (1.5, 2.0, 1e16, 2.0**64, {"n": 0.5}, [[0.25]], [1, [2, {"x": 3.0}]], 7, "s"):
                changed = copy.deepcopy(record)
                parent = changed
                for key in at[:-1]:
                    parent = parent[key]
                parent[at[-1]] = value
                expected = valid(changed) and _float_free(changed)
                assert plain(changed) == expected, (at, value)
                checked += 1
                floats += not _float_free(changed)
    assert checked > 5000 and floats > 3000


def test_a_beacon_whose_data_holds_a_float_is_read_the_slow_way_and_gives_the_same_facts(tmp_path):
    record = {"v": 2, "seq": 0, "ts": NOW, "kind": "beacon", "prev": "0" * 64, "flow": "f", "request": 0,
              "url": "http://metrics.test/collect", "event": "scroll", "data": {"depth": 0.5, "big": 1e16}}
    record["hash"] = record_hash(record)
    raw = canonical_json(record) + b"\n"
    assert record_valid()(record) and not record_valid_plain()(record)
    assert same(line_facts(raw, lambda: True, tmp_path), plain_facts(raw, True, tmp_path))


def test_the_predicate_knows_the_closures_keywords():
    assert KEYWORDS == tuple(_Compiler({}).keywords({}))


@pytest.mark.parametrize("chunk", [1, 7, 64, 333, 4096])
def test_workers_and_chunks_of_any_size_find_what_one_process_finds(sessions, tmp_path, monkeypatch, chunk):
    rng = random.Random(chunk)
    monkeypatch.setattr(verify_module, "CHUNK_BYTES", chunk)
    session = sessions[1]  # signed, every kind
    lines = lines_of(session)
    copies = [list(lines)]
    for _ in range(6):
        damaged_lines = list(lines)
        i = rng.randrange(len(lines))
        how = rng.randrange(4)
        if how == 0:
            damaged_lines[i] = damaged(lines[i][:-1], rng) + b"\n"
        elif how == 1:
            del damaged_lines[i]
        elif how == 2:
            damaged_lines.append(lines[i][: rng.randrange(1, len(lines[i]) - 1)])  # a torn tail
        else:
            damaged_lines[i], damaged_lines[-1] = damaged_lines[-1], damaged_lines[i]
        copies.append(damaged_lines)
    for n, copy_lines in enumerate(copies):
        target = tmp_path / f"copy{n}" / session.name   # a signed log is its own session's
        target.mkdir(parents=True)
        (target / "blobs").symlink_to(session / "blobs")
        put_lines(target, copy_lines)
        alone = verify(target, jobs=1)
        assert verify(target, jobs=3) == alone
        assert alone.ok == (copy_lines == lines)  # signed: even a line only written otherwise is caught


@pytest.mark.parametrize("threads", [1, 2])
def test_workers_forked_or_started_anew_find_what_one_process_finds(sessions, tmp_path, monkeypatch, threads):
    """Workers are forked from a process that runs no other thread, else started anew (exec): a fork
    of a process whose other threads may hold locks could hang. Both find what one process finds.
    (The threads are counted as verify counts them: this test process may hold others of its own.)"""
    monkeypatch.setattr(verify_module, "CHUNK_BYTES", 333)
    monkeypatch.setattr(verify_module.threading, "active_count", lambda: threads)
    started = []
    monkeypatch.setattr(verify_module, "_Forked", lambda *a, _f=verify_module._Forked: started.append("fork") or _f(*a))
    popen = verify_module.subprocess.Popen
    monkeypatch.setattr(verify_module.subprocess, "Popen", lambda *a, **k: started.append("exec") or popen(*a, **k))
    session = sessions[1]
    lines = lines_of(session)
    for n, copy_lines in enumerate([lines, lines[:5] + lines[6:], lines[:-1] + [lines[-1][:-9]]]):
        target = tmp_path / f"copy{n}" / session.name   # a signed log is its own session's
        target.mkdir(parents=True)
        (target / "blobs").symlink_to(session / "blobs")
        put_lines(target, copy_lines)
        assert verify(target, jobs=2) == verify(target, jobs=1)
    assert started == ["fork" if threads == 1 else "exec"] * 6


def test_a_long_log_is_read_by_workers(sessions, tmp_path, monkeypatch):
    monkeypatch.setattr(verify_module, "PARALLEL_BYTES", 1)
    assert verify_module._jobs(sessions[0] / LOG_NAME, None) == min(len(verify_module.os.sched_getaffinity(0)),
                                                                   verify_module.MAX_JOBS)
    assert verify(sessions[1]).ok
