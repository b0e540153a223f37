"""`verify` finds and classifies every kind of damage; `spillage verify` prints and exits right."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from capture_helpers import BIG, lines_of, put_lines, seal_meta, write_session

from spillage.proxy.capturelog import canonical_json, record_hash
from spillage.proxy.layout import LOG_NAME
from spillage.proxy.verify import DAMAGE, VerifyResult, verify
from spillage.runner.cli import main


@pytest.fixture
def session(tmp_path: Path) -> Path:
    """A sealed session; line i+1 holds seq i. Line 5 (seq 4) names the blob."""
    write_session(tmp_path / "s")
    return tmp_path / "s"


def damage(session: Path) -> tuple[str | None, int | None, int | None]:
    result = verify(session)
    assert result.ok is (result.damage is None)
    assert result.damage is None or result.damage in DAMAGE
    return result.damage, result.line, result.seq


def rewrite(line: bytes, **changes: object) -> bytes:
    """The line with `changes` applied and its hash recomputed."""
    rec = {**json.loads(line), **changes}
    rec["hash"] = record_hash(rec)
    return canonical_json(rec) + b"\n"


def test_intact_log_is_ok(session: Path) -> None:
    lines = lines_of(session)
    result = verify(session)
    assert result == VerifyResult(
        ok=True, count=len(lines), head=json.loads(lines[-1])["hash"], path=session / LOG_NAME
    )
    assert verify(session / LOG_NAME) == result


def test_modified_value(session: Path) -> None:
    lines = lines_of(session)
    lines[1] = lines[1].replace(b"shop.test/search", b"shop.evil/search")
    put_lines(session, lines)
    assert damage(session) == ("modified", 2, 1)


def test_modified_and_rehashed_record_breaks_the_next_prev(session: Path) -> None:
    # A record whose own hash is right but whose successor's `prev` does not name it was changed and
    # re-hashed: the damage is named at its own line, not at the successor's.
    lines = lines_of(session)
    lines[1] = rewrite(lines[1], url="http://shop.test/search?q=shoes")
    put_lines(session, lines)
    result = verify(session)
    assert (result.damage, result.line, result.seq) == ("modified", 2, 1)
    assert "changed and re-hashed" in result.message and "(line 3)" in result.message


def test_rehashed_inline_body_that_no_longer_matches_its_sha256(session: Path) -> None:
    lines = lines_of(session)
    body = json.loads(lines[2])["body"]
    lines[2] = rewrite(lines[2], body={**body, "text": body["text"].replace("29,99", "19,99")})
    put_lines(session, lines)
    assert damage(session) == ("modified", 3, 2)


def test_missing_middle_line(session: Path) -> None:
    lines = lines_of(session)
    put_lines(session, lines[:3] + lines[4:])
    assert damage(session) == ("missing", 4, 4)


def test_missing_first_line(session: Path) -> None:
    put_lines(session, lines_of(session)[1:])
    assert damage(session) == ("missing", 1, 1)


def test_duplicated_line(session: Path) -> None:
    lines = lines_of(session)
    put_lines(session, lines[:4] + [lines[3]] + lines[4:])
    assert damage(session) == ("inserted", 5, 3)


def test_swapped_lines(session: Path) -> None:
    lines = lines_of(session)
    lines[5], lines[6] = lines[6], lines[5]
    put_lines(session, lines)
    assert damage(session) == ("reordered", 6, 6)


def test_line_moved_far_away(session: Path) -> None:
    lines = lines_of(session)
    put_lines(session, lines[:2] + lines[3:-1] + [lines[2], lines[-1]])
    assert damage(session) == ("reordered", 3, 3)


def test_dropped_session_end(session: Path) -> None:
    lines = lines_of(session)
    put_lines(session, lines[:-1])
    result = verify(session)
    n = len(lines) - 1
    assert (result.damage, result.line, result.seq, result.count) == ("truncated", n + 1, n, n)
    assert "without session_end" in result.message


def test_dropped_last_lines(session: Path) -> None:
    put_lines(session, lines_of(session)[:5])
    assert damage(session) == ("truncated", 6, 5)


def test_empty_log_is_truncated(session: Path) -> None:
    put_lines(session, [])
    assert damage(session) == ("truncated", 1, 0)


def test_torn_last_line(session: Path) -> None:
    lines = lines_of(session)
    lines[-1] = lines[-1][: len(lines[-1]) // 2]
    put_lines(session, lines)
    result = verify(session)
    assert (result.damage, result.line) == ("torn last line", len(lines))
    assert result.count == len(lines) - 1


def test_blob_missing(session: Path) -> None:
    blob = json.loads(lines_of(session)[4])["body"]["sha256"]
    (session / "blobs" / blob).unlink()
    assert damage(session) == ("blob missing", 5, 4)


def test_blob_altered(session: Path) -> None:
    blob = json.loads(lines_of(session)[4])["body"]["sha256"]
    (session / "blobs" / blob).write_bytes(BIG.replace(b"\x00", b"\x01", 1))
    result = verify(session)
    assert (result.damage, result.line, result.seq) == ("blob altered", 5, 4)


def test_junk_line_in_the_middle(session: Path) -> None:
    lines = lines_of(session)
    put_lines(session, lines[:3] + [b"GET http://shop.test/ HTTP/1.1\n"] + lines[3:])
    assert damage(session) == ("modified", 4, 3)


def test_record_after_session_end(session: Path) -> None:
    lines = lines_of(session)
    end = json.loads(lines[-1])
    late = {**end, "seq": end["seq"] + 1, "prev": end["hash"], "kind": "error",
            "flow": None, "request": None, "message": "late"}
    del late["reason"], late["records"]
    put_lines(session, lines + [rewrite(canonical_json(late))])
    assert damage(session) == ("inserted", len(lines) + 1, len(lines))


def test_meta_agrees(session: Path) -> None:
    lines = lines_of(session)
    seal_meta(session, len(lines), json.loads(lines[-1])["hash"])
    assert verify(session).ok


def test_meta_sealed_more_records(session: Path) -> None:
    lines = lines_of(session)
    seal_meta(session, len(lines) + 3, "a" * 64)
    result = verify(session)
    assert (result.damage, result.line, result.seq) == ("truncated", len(lines) + 1, len(lines))
    assert "meta.json" in result.message


def test_meta_sealed_fewer_records(session: Path) -> None:
    lines = lines_of(session)
    seal_meta(session, len(lines) - 2, json.loads(lines[-3])["hash"])
    assert damage(session) == ("inserted", len(lines) - 1, len(lines) - 2)


def test_meta_sealed_another_head(session: Path) -> None:
    # A rehashed last record is invisible to the chain; the sealed head catches it.
    lines = lines_of(session)
    seal_meta(session, len(lines), json.loads(lines[-1])["hash"])
    lines[-1] = rewrite(lines[-1], reason="nothing to see here")
    put_lines(session, lines)
    assert damage(session) == ("modified", len(lines), len(lines) - 1)


def test_meta_without_capture_is_ignored_but_broken_meta_is_not(session: Path) -> None:
    (session / "meta.json").write_text('{"scenario": "glucose"}')
    assert verify(session).ok
    (session / "meta.json").write_text('{"capture": ')
    assert damage(session)[0] == "modified"


# -- spillage verify ---------------------------------------------------------------------


@pytest.fixture
def run(capsys):
    """`spillage verify PATH`: (status, stdout, stderr)."""
    def verify_command(path: Path) -> tuple[int, str, str]:
        code = main(["verify", str(path)])
        return code, *capsys.readouterr()
    return verify_command


def test_spillage_verify_ok(session: Path, run) -> None:
    head = json.loads(lines_of(session)[-1])["hash"]
    n = len(lines_of(session))
    unsigned = "; unsigned: nothing but a head kept elsewhere protects it from a consistent rewrite " \
               "(docs/EVIDENCE.md)"
    assert run(session) == (0, f"OK {n} records, head {head}{unsigned}\n", "")
    assert run(session / LOG_NAME) == (0, f"OK {n} records, head {head}{unsigned}\n", "")


def test_spillage_verify_fail(session: Path, run) -> None:
    lines = lines_of(session)
    put_lines(session, lines[:3] + lines[4:])
    code, out, err = run(session)
    assert code == 1 and err == ""
    assert out == (
        f"FAIL {session / LOG_NAME}:4: seq 4: missing: expected seq 3, found 4; "
        "seq 3 is nowhere in the log\n"
    )


def test_spillage_verify_fail_torn(session: Path, run) -> None:
    lines = lines_of(session)
    put_lines(session, lines[:-1] + [lines[-1][:10]])
    code, out, _ = run(session)
    n = len(lines)
    assert code == 1
    assert out.startswith(f"FAIL {session / LOG_NAME}:{n}: seq {n - 1}: torn last line: ")
    assert out.count("\n") == 1


def test_spillage_verify_unusable_input(tmp_path: Path, run) -> None:
    code, out, err = run(tmp_path / "nope")
    assert (code, out) == (2, "") and err.count("\n") == 1 and "no such file" in err
    code, out, err = run(tmp_path)
    assert (code, out) == (2, "") and err == f"spillage: {tmp_path}: no capture.jsonl in this folder\n"
