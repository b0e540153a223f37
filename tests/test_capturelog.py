"""Writer, reader and schema of the capture log (docs/CAPTURE_FORMAT.md)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from pathlib import Path

import jsonschema
import pytest
from capture_helpers import BIG, PNG, lines_of, put_lines, records_of, write_session

from spillage.proxy.capturelog import (
    WRITER_KINDS,
    DEFAULT_INLINE_LIMIT,
    GENESIS,
    KIND_FIELDS,
    OPTIONAL_FIELDS,
    KINDS,
    LOG_NAME,
    SCHEMA_PATH,
    CaptureError,
    CaptureWriter,
    Line,
    TornLineError,
    canonical_json,
    iter_records,
    read_body,
    record_hash,
    utc_timestamp,
)
from spillage.proxy.verify import verify


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture
def session(tmp_path: Path) -> Path:
    return tmp_path / "2026-11-29T120000-glucose"


# -- round trip and schema ---------------------------------------------------------------


def test_round_trip_every_kind(session: Path, validator: jsonschema.Draft202012Validator) -> None:
    written = write_session(session)
    # an unsigned log holds every kind but the signer's and a crash seal's (tests/test_signing.py)
    assert {r["kind"] for r in written} == set(KINDS) - WRITER_KINDS - {"crash_seal"}

    read = list(iter_records(session))
    assert [line.record for line in read] == written
    assert [line.lineno for line in read] == list(range(1, len(written) + 1))

    prev = GENESIS
    for seq, rec in enumerate(written):
        assert rec["v"] == 2 and rec["seq"] == seq and rec["prev"] == prev
        assert rec["hash"] == record_hash(rec)
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", rec["ts"])
        errors = [e.message for e in validator.iter_errors(rec)]
        assert errors == [], (rec["kind"], errors)
        prev = rec["hash"]


def test_lines_are_canonical_utf8(session: Path) -> None:
    written = write_session(session)
    lines = lines_of(session)
    assert lines == [canonical_json(r) + b"\n" for r in written]
    assert "29,99 €</h1> 血糖仪 🩸".encode() in lines[2]  # raw UTF-8, not \u escapes


def test_bodies_inline_base64_and_blob(session: Path) -> None:
    written = write_session(session)
    html, png, big = written[2]["body"], written[3]["body"], written[4]["body"]
    assert html["text"].startswith("<h1>Blutzuckermessgerät")
    assert set(png) == {"size", "sha256", "base64"} and png["size"] == len(PNG)
    assert big == {"size": len(BIG), "sha256": hashlib.sha256(BIG).hexdigest(), "blob": True}
    assert (session / "blobs" / big["sha256"]).read_bytes() == BIG
    assert read_body(session, png) == PNG
    assert read_body(session / LOG_NAME, big) == BIG
    assert read_body(session, html).decode() == html["text"]
    assert read_body(session, None) == b""
    assert verify(session).ok


def test_body_limits_and_blob_dedup(session: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with CaptureWriter(session, inline_limit=8) as w:
        assert w.body(None) is None and w.body(b"") is None
        assert w.body(b"12345678")["text"] == "12345678"  # exactly the limit: inline
        assert w.body(b"\xff" * 8)["base64"] == "//////////8="
        replaced: list[str] = []
        real_replace = os.replace
        monkeypatch.setattr(
            os, "replace", lambda a, b: (replaced.append(str(b)), real_replace(a, b))
        )
        first = w.body(b"123456789")
        assert first["blob"] is True and first["size"] == 9
        assert w.body(b"123456789") == first
        assert len(replaced) == 1, "an existing blob is not written again"
    assert sorted(p.name for p in (session / "blobs").iterdir()) == [first["sha256"]]
    assert DEFAULT_INLINE_LIMIT == 65536


def test_read_body_rejects_altered_bytes(session: Path) -> None:
    written = write_session(session)
    big = written[4]["body"]
    (session / "blobs" / big["sha256"]).write_bytes(BIG[:-1] + b"!")
    with pytest.raises(CaptureError, match="does not match"):
        read_body(session, big)
    (session / "blobs" / big["sha256"]).unlink()
    with pytest.raises(CaptureError, match="blob missing"):
        read_body(session, big)
    with pytest.raises(CaptureError, match="does not match"):
        read_body(session, {**written[2]["body"], "text": "forged"})


def test_schema_matches_kind_fields(validator: jsonschema.Draft202012Validator) -> None:
    schema = validator.schema
    assert schema["properties"]["kind"]["enum"] == list(KINDS)
    per_kind = {b["if"]["properties"]["kind"]["const"]: b["then"] for b in schema["allOf"]
                if set(b["if"]["properties"]) == {"kind"}}
    v2_only = {b["if"]["properties"]["kind"]["const"]: b["then"]["required"] for b in schema["allOf"]
               if b["if"]["properties"].get("v") == {"const": 2}}
    assert v2_only == {"import": ["lacks"]}  # v1 import records, written before it existed, lack it
    for kind, fields in KIND_FIELDS.items():
        assert per_kind[kind]["required"] + v2_only.get(kind, []) == list(fields)
        assert set(per_kind[kind]["properties"]) == set(fields) | set(OPTIONAL_FIELDS.get(kind, ()))


@pytest.mark.parametrize(
    "change",
    [
        {"extra": 1},
        {"body": {"size": 3, "sha256": "0" * 64, "text": "abc", "base64": "YWJj"}},
        {"body": {"size": 3, "sha256": "0" * 64}},
        {"body": {"size": 3, "sha256": "0" * 64, "blob": False}},
        {"headers": [["Host", "shop.test", "extra"]]},
        {"headers": [["Host"]]},
        {"ts": "2026-11-29 12:00:00"},
        {"seq": -1},
        {"v": 3},
        {"prev": "abc"},
        {"kind": "telemetry"},
    ],
)
def test_schema_rejects_malformed_records(
    session: Path, validator: jsonschema.Draft202012Validator, change: dict
) -> None:
    request = write_session(session)[1]
    assert validator.is_valid(request)
    assert not validator.is_valid({**request, **change})


def test_schema_requires_per_kind_fields(
    session: Path, validator: jsonschema.Draft202012Validator
) -> None:
    for rec in write_session(session):
        for field in KIND_FIELDS[rec["kind"]]:
            broken = {k: v for k, v in rec.items() if k != field}
            assert not validator.is_valid(broken), (rec["kind"], field)


# -- writer ------------------------------------------------------------------------------


def test_writer_refuses_to_overwrite(session: Path) -> None:
    write_session(session, seal=False)
    before = lines_of(session)
    with pytest.raises(CaptureError, match="already exists") as exc:
        CaptureWriter(session)
    assert exc.value.path == session / LOG_NAME
    assert lines_of(session) == before


def test_writer_accepts_existing_empty_log(session: Path) -> None:
    session.mkdir()
    (session / LOG_NAME).touch()
    with CaptureWriter(session) as w:
        w.append("error", flow=None, request=None, message="x")
    assert records_of(session)[0]["seq"] == 0


def test_append_validates_kind_and_fields(session: Path) -> None:
    with CaptureWriter(session) as w:
        with pytest.raises(ValueError, match="unknown record kind"):
            w.append("telemetry", flow="f")
        with pytest.raises(ValueError, match="seq"):
            w.append("error", flow=None, request=None, message="m", seq=5)
        with pytest.raises(ValueError, match="missing fields: request"):
            w.append("error", flow=None, message="m")
        with pytest.raises(ValueError, match="unknown fields: note"):
            w.append("error", flow=None, request=None, message="m", note="x")
        with pytest.raises(TypeError):
            w.append("error", flow=None, request=None, message=object())
        with pytest.raises(ValueError, match="records must be 0"):
            w.append("session_end", reason="proxy shutdown", records=3)
        with pytest.raises(ValueError, match="written by the writer itself"):
            w.append("checkpoint", records=0, head="f" * 64, root="f" * 64, key="k", signature="s")
        assert w.count == 0 and w.head == GENESIS, "rejected records leave no trace"
        end = w.append("session_end", reason="proxy shutdown", records=0)
        assert w.sealed and w.head == end["hash"]
        with pytest.raises(ValueError, match="sealed"):
            w.append("error", flow=None, request=None, message="late")
    with pytest.raises(ValueError, match="closed"):
        w.append("error", flow=None, request=None, message="closed")
    assert len(lines_of(session)) == 1


def test_resume_continues_the_chain(session: Path) -> None:
    first = write_session(session, seal=False)
    with CaptureWriter.resume(session) as w:
        assert (w.seq, w.count, w.head) == (len(first), len(first), first[-1]["hash"])
        rec = w.append("session_end", reason="sealed by runner after proxy exit", records=w.count)
    assert rec["prev"] == first[-1]["hash"] and rec["seq"] == len(first)
    result = verify(session)
    assert result.ok and result.count == len(first) + 1 and result.head == rec["hash"]


def test_resume_refuses_torn_sealed_broken_and_absent_logs(tmp_path: Path) -> None:
    torn = tmp_path / "torn"
    write_session(torn, seal=False)
    with open(torn / LOG_NAME, "ab") as f:
        f.write(b'{"v":1,"seq":')
    with pytest.raises(TornLineError, match="cannot resume"):
        CaptureWriter.resume(torn)

    sealed = tmp_path / "sealed"
    n = len(write_session(sealed))
    with pytest.raises(CaptureError, match="sealed") as exc:
        CaptureWriter.resume(sealed)
    assert exc.value.line == n

    broken = tmp_path / "broken"
    write_session(broken, seal=False)
    lines = lines_of(broken)
    put_lines(broken, lines[:3] + lines[4:])
    with pytest.raises(CaptureError, match="chain is broken") as exc:
        CaptureWriter.resume(broken)
    assert exc.value.line == 4

    with pytest.raises(CaptureError, match="no capture log"):
        CaptureWriter.resume(tmp_path / "absent")


def test_fsync_by_timer_thread_and_on_close(
    session: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    synced = threading.Event()
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        calls.append(threading.current_thread().name)
        synced.set()
        real_fsync(fd)

    w = CaptureWriter(session)  # default interval: one second
    monkeypatch.setattr(os, "fsync", counting_fsync)
    w.append("error", flow=None, request=None, message="first")
    assert synced.wait(1.5), "no fsync within 1.5 s of an append"
    assert calls == ["capture-fsync"]
    w.close()
    assert calls == ["capture-fsync", "MainThread"]
    w.close()
    assert len(calls) == 2, "close is idempotent"
    assert not w._thread.is_alive()


def test_no_fsync_while_idle(session: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    synced = threading.Event()
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), synced.set()))
    with CaptureWriter(session, fsync_interval=0.05) as w:
        calls.clear()
        w.append("error", flow=None, request=None, message="one")
        assert synced.wait(1)
        threading.Event().wait(0.3)
        # other tests' writers may still be open in this process: count only this log's fsyncs
        assert calls.count(w._fd) == 1, "a clean log is not fsynced again"


def test_concurrent_appends_keep_one_chain(session: Path) -> None:
    with CaptureWriter(session) as w:

        def worker(n: int) -> None:
            for i in range(50):
                w.append("error", flow=f"flow-{n}", request=None, message=f"m{i}")

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        w.append("session_end", reason="proxy shutdown", records=w.count)
    result = verify(session)
    assert result.ok and result.count == 201


# -- reader ------------------------------------------------------------------------------


def test_crash_mid_write(session: Path) -> None:
    written = write_session(session, seal=False)
    n = len(written)
    half = canonical_json({"v": 1, "seq": n, "kind": "request", "url": "http://shop.test/"})
    with open(session / LOG_NAME, "ab") as f:
        f.write(half[: len(half) // 2])

    seen: list[Line] = []
    with pytest.raises(TornLineError) as exc:
        for line in iter_records(session):
            seen.append(line)
    assert [line.record for line in seen] == written
    assert exc.value.line == n + 1 and exc.value.path == session / LOG_NAME

    result = verify(session)
    assert (result.damage, result.line, result.count) == ("torn last line", n + 1, n)


def test_last_line_with_newline_but_incomplete_json_is_torn(session: Path) -> None:
    write_session(session, seal=False)
    with open(session / LOG_NAME, "ab") as f:
        f.write(b'{"v":1,"seq":\n')
    with pytest.raises(TornLineError, match="not complete JSON"):
        list(iter_records(session))


@pytest.mark.parametrize(
    "junk",
    [b"not json\n", b"[1, 2]\n", b'{"a":1,"a":2}\n', b'{"a":NaN}\n', b"\xff\xfe\n", b"\n"],
)
def test_reader_names_file_and_line_of_bad_lines(session: Path, junk: bytes) -> None:
    write_session(session)
    lines = lines_of(session)
    put_lines(session, lines[:2] + [junk] + lines[2:])
    with pytest.raises(CaptureError) as exc:
        list(iter_records(session / LOG_NAME))
    assert type(exc.value) is CaptureError, "a bad middle line is not a torn line"
    assert exc.value.line == 3
    assert str(exc.value).startswith(f"{session / LOG_NAME}:3: not a JSON record")
    assert "\n" not in str(exc.value)


def test_capture_error_str() -> None:
    assert str(CaptureError("bad\nthing", path="x/capture.jsonl", line=7)) == (
        "x/capture.jsonl:7: bad thing"
    )
    assert str(CaptureError("bad", path="x/capture.jsonl")) == "x/capture.jsonl: bad"
    assert str(CaptureError("bad")) == "bad"
    err = CaptureError("bad", path="p", line=2, seq=1)
    assert (err.path, err.line, err.seq) == (Path("p"), 2, 1)


def test_canonical_json_and_hash() -> None:
    assert canonical_json({"b": 1, "a": ["é", None]}) == '{"a":["é",null],"b":1}'.encode()
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})
    rec = {"v": 1, "kind": "error"}
    assert record_hash({**rec, "hash": "whatever"}) == record_hash(rec)
    assert record_hash(rec) == hashlib.sha256(b'{"kind":"error","v":1}').hexdigest()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", utc_timestamp())
