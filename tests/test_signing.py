"""Signed Merkle checkpoints, crash seals, proofs and the files' modes (docs/EVIDENCE.md)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from capture_helpers import NOW, lines_of, put_lines, sign_checkpoint, signed_session, write_session

from spillage.proxy.capturelog import CaptureWriter
from spillage.proxy.capturelog import canonical_json
from spillage.proxy.capturelog import iter_records
from spillage.proxy.capturelog import record_hash
from spillage.proxy.layout import META_NAME
from spillage.proxy.layout import TORN_TAIL
from spillage.proxy.layout import seal_permissions
from spillage.proxy.layout import write_meta
from spillage.proxy.proofs import ProofError
from spillage.proxy.proofs import check_proof
from spillage.proxy.proofs import prove_consistency
from spillage.proxy.proofs import prove_inclusion
from spillage.proxy.proofs import prove_inclusions
from spillage.proxy.seal import SealError
from spillage.proxy.seal import seal_crashed
from spillage.proxy.signing import SessionKey
from spillage.proxy.signing import Signer
from spillage.proxy.signing import fingerprint
from spillage.proxy.signing import load_or_create_key
from spillage.proxy.signing import raw_public
from spillage.proxy.verify import CRASH_SEALED
from spillage.proxy.verify import verify
from spillage.runner.cli import main



@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("home")


@pytest.fixture(scope="module")
def key(home):
    return load_or_create_key(home)


@pytest.fixture
def pin(key) -> str:
    return fingerprint(raw_public(key))


def kinds(path: Path) -> list[str]:
    return [line.record["kind"] for line in iter_records(path)]


def test_a_signed_log_opens_with_its_signer_and_ends_with_a_signed_head(tmp_path, key, pin):
    signed_session(tmp_path / "s", key)
    found = kinds(tmp_path / "s")
    assert found[0] == "signer" and found[-2:] == ["session_end", "checkpoint"]
    data = [k for k in found if k != "checkpoint"]
    assert found.count("checkpoint") == 1 + (len(data) - 1) // 4  # every 4 records, and after the seal
    result = verify(tmp_path / "s", pin)
    assert result.ok and result.signed.pinned and result.signed.covered == len(found) - 1
    assert f"signed by {pin} (pinned)" in result.summary()
    assert f"the last covers all {len(found) - 1} records before it" in result.summary()


def test_checkpoints_also_come_with_time(tmp_path, key):
    reported = []
    signing = SessionKey.issue(key, "s", NOW)
    with CaptureWriter(tmp_path / "s", signing=signing, checkpoint_interval=0.05,
                       on_checkpoint=lambda record, final: reported.append((record["records"], final))) as w:
        w.append("error", flow=None, request=None, message="one")
        time.sleep(0.3)
        w.append("session_end", reason="done", records=w.count)
    assert reported[0] == (2, False) and reported[-1] == (4, True)
    assert verify(tmp_path / "s").ok


def test_pinning_tells_whose_key_it_is(tmp_path, key, pin):
    signed_session(tmp_path / "s", key)
    other = load_or_create_key(tmp_path / "other-home")
    assert verify(tmp_path / "s", fingerprint(raw_public(other))).damage == "wrong key"
    write_session(tmp_path / "unsigned")
    assert verify(tmp_path / "unsigned").ok
    assert verify(tmp_path / "unsigned", pin).damage == "unsigned"


def rewrite_chain(path: Path, start: int, change, key=None) -> None:
    """Change the records from `start` on with `change(record)` and re-chain them; with `key`, the whole
    log is re-signed by a new session key that `key` certifies (a forger holding a key of their own)."""
    from spillage.proxy.merkle import MerkleFrontier, leaf_hash

    records = [line.record for line in iter_records(path)]
    forged = SessionKey.issue(key, records[0]["session"], NOW) if key else None
    prev, tree, out = "0" * 64, MerkleFrontier(), []
    for rec in records:
        rec = dict(rec)
        if forged and rec["kind"] == "signer":
            rec.update(forged.record_fields())
        if rec["seq"] >= start:
            change(rec)
        rec["prev"] = prev
        if forged and rec["kind"] == "checkpoint":
            rec["head"] = prev
            sign_checkpoint(rec, tree.root(), forged)
        rec.pop("hash")
        rec["hash"] = record_hash(rec)
        line = canonical_json(rec)
        tree.append(leaf_hash(line))
        out.append(line + b"\n")
        prev = rec["hash"]
    put_lines(path, out)


def url_changed(rec: dict) -> None:
    if rec.get("kind") == "request":
        rec["url"] = rec["url"].replace("shop.test", "shop.evil")


def test_a_consistent_rewrite_is_caught_by_the_signatures(tmp_path, key, pin):
    signed_session(tmp_path / "s", key)
    rewrite_chain(tmp_path / "s", 3, url_changed)
    result = verify(tmp_path / "s")
    assert not result.ok and result.damage in ("modified", "bad signature")


def test_a_whole_chain_rewrite_under_another_key_is_caught_when_the_key_is_pinned(tmp_path, key, pin):
    signed_session(tmp_path / "s", key)
    write_meta(tmp_path / "s", {"capture": {"records": 1, "head": "0" * 64}})
    (tmp_path / "s" / META_NAME).unlink()  # the forger deletes meta.json
    rewrite_chain(tmp_path / "s", 0, url_changed, key=load_or_create_key(tmp_path / "forger"))
    assert verify(tmp_path / "s").ok, "without a pin a self-consistent forgery is indistinguishable"
    assert verify(tmp_path / "s", pin).damage == "wrong key"


def test_a_dropped_suffix_cannot_be_sealed_again_without_the_key(tmp_path, key, pin):
    signed_session(tmp_path / "s", key)
    lines = lines_of(tmp_path / "s")
    put_lines(tmp_path / "s", lines[:6])
    end = json.loads(lines[-2])
    end.update(seq=6, prev=json.loads(lines[5])["hash"], records=6)
    end["hash"] = record_hash({k: v for k, v in end.items() if k != "hash"})
    put_lines(tmp_path / "s", lines[:6] + [canonical_json(end) + b"\n"])
    result = verify(tmp_path / "s")
    assert result.damage == "truncated" and "final signed checkpoint" in result.message


def crashed(path: Path, key, torn: bytes = b'{"v":2,"seq":') -> SessionKey:
    """A signed log whose writer died: no seal, and a torn last line."""
    signing = signed_session(path, key, seal=False)
    with open(path / "capture.jsonl", "ab") as f:
        f.write(torn)
    return signing


def test_a_crashed_log_is_sealed_as_such_and_never_reads_clean(tmp_path, key, pin):
    crashed(tmp_path / "s", key)
    assert verify(tmp_path / "s").damage == "torn last line"
    record = seal_crashed(tmp_path / "s", Signer(key), "spillage seal", "the proxy was killed")
    assert record["kind"] == "crash_seal" and record["torn_tail"]["size"] == 13
    assert (tmp_path / "s" / TORN_TAIL).read_bytes() == b'{"v":2,"seq":'
    assert record["by"]["tool"] == "spillage seal" and record["by"]["key"] == pin
    result = verify(tmp_path / "s", pin)
    assert result.damage == CRASH_SEALED
    assert "sealed by tool spillage seal" in result.message and "the proxy was killed" in result.message
    assert "torn last line of 13 bytes was moved to capture.torn" in result.message
    assert kinds(tmp_path / "s")[-2:] == ["crash_seal", "checkpoint"]
    with pytest.raises(SealError, match="sealed"):
        seal_crashed(tmp_path / "s", Signer(key), "spillage seal", "again")


def test_a_log_still_being_written_or_damaged_is_not_sealed(tmp_path, key):
    signing = SessionKey.issue(key, "s", NOW)
    with CaptureWriter(tmp_path / "s", signing=signing) as writer:
        writer.append("error", flow=None, request=None, message="x")
        with pytest.raises(SealError, match="still writing"):
            seal_crashed(tmp_path / "s", Signer(key), "spillage seal", "live")
    crashed(tmp_path / "d", key, torn=b"")
    lines = lines_of(tmp_path / "d")
    put_lines(tmp_path / "d", lines[:2] + lines[3:])
    with pytest.raises(SealError, match="cannot seal"):
        seal_crashed(tmp_path / "d", Signer(key), "spillage seal", "damaged")


def test_the_seal_command(tmp_path, home, pin, capsys):
    crashed(tmp_path / "s", load_or_create_key(home))
    write_meta(tmp_path / "s", {"status": "running"})
    assert main(["--home", str(home), "seal", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("sealed after crash at seq") and CRASH_SEALED in out
    meta = json.loads((tmp_path / "s" / META_NAME).read_text())
    assert meta["evidence"] == "sealed after crash"
    assert main(["--home", str(home), "verify", "--key", pin, str(tmp_path / "s")]) == 1
    assert main(["--home", str(home), "seal", str(tmp_path / "s")]) == 1
    assert main(["--home", str(home), "seal", str(tmp_path / "nothing")]) == 2


# -- proofs ----------------------------------------------------------------------------------------


def test_every_record_has_an_inclusion_proof_that_holds_alone(tmp_path, key, pin):
    signed_session(tmp_path / "s", key)
    n = len(kinds(tmp_path / "s"))
    for seq in range(n - 1):
        proof = json.loads(json.dumps(prove_inclusion(tmp_path / "s", seq, pin)))
        ok, verdict = check_proof(proof, pin)
        assert ok, verdict
    assert verdict.startswith(f"OK record {n - 2} (session_end) is in session s's log of {n - 1} records")
    with pytest.raises(ProofError, match="covers records 0 to"):
        prove_inclusion(tmp_path / "s", n - 1)
    many = prove_inclusions(tmp_path / "s", [3, 1, 3], pin)   # the forensic page's: one reading of the log
    assert list(many) == [1, 3] and many[3] == prove_inclusion(tmp_path / "s", 3, pin)


@pytest.mark.parametrize("tamper", [
    lambda p: p["record"].update(url="http://shop.evil/"),
    lambda p: p["record"].update(url="http://shop.evil/", hash=record_hash({**p["record"], "url": "http://shop.evil/"})),
    lambda p: p["audit_path"].reverse(),
    lambda p: p["audit_path"].pop(),
    lambda p: p["signed_head"].update(records=p["signed_head"]["records"] + 1),
    lambda p: p["signed_head"].update(root="0" * 64),
    lambda p: p["signer"].update(session="another"),
    lambda p: p.update(leaf_index=p["leaf_index"] + 1),
])
def test_a_tampered_inclusion_proof_fails(tmp_path, key, pin, tamper):
    signed_session(tmp_path / "s", key)
    proof = prove_inclusion(tmp_path / "s", 1)
    tamper(proof)
    ok, verdict = check_proof(proof, pin)
    assert not ok and verdict.startswith("FAIL")


def test_a_proof_under_another_key_fails_the_pin(tmp_path, key):
    signed_session(tmp_path / "s", key)
    other = fingerprint(raw_public(load_or_create_key(tmp_path / "other")))
    ok, verdict = check_proof(prove_inclusion(tmp_path / "s", 1), other)
    assert not ok and "not by the pinned" in verdict


def test_later_signed_heads_extend_earlier_ones(tmp_path, key, pin):
    signed_session(tmp_path / "s", key)
    sizes = [line.record["records"] for line in iter_records(tmp_path / "s") if line.record["kind"] == "checkpoint"]
    for old in sizes:
        for new in sizes:
            if old <= new:
                ok, verdict = check_proof(prove_consistency(tmp_path / "s", old, new), pin)
                assert ok, verdict
    proof = prove_consistency(tmp_path / "s", sizes[0], sizes[-1])
    proof["old_head"], proof["new_head"] = proof["new_head"], proof["old_head"]
    assert not check_proof(proof, pin)[0]
    with pytest.raises(ProofError, match="no signed head of tree size 3"):
        prove_consistency(tmp_path / "s", 3, sizes[-1])


def test_prove_and_verify_proof_commands(tmp_path, home, pin, capsys):
    signed_session(tmp_path / "s", load_or_create_key(home))
    out = tmp_path / "proof.json"
    assert main(["prove", str(tmp_path / "s"), "--seq", "2", "--out", str(out), "--key", pin]) == 0
    assert main(["verify-proof", str(out), "--key", pin]) == 0
    assert capsys.readouterr().out.startswith(f"OK {out}: record 2 (request")
    proof = json.loads(out.read_text())
    proof["record"]["url"] = "http://shop.evil/"
    out.write_text(json.dumps(proof))
    assert main(["verify-proof", str(out)]) == 1
    out.write_text("{not json")
    assert main(["verify-proof", str(out)]) == 2
    assert main(["prove", str(tmp_path / "s"), "--consistency", "1", "2"]) == 2  # a head the log lacks
    assert "no signed head of tree size 1" in capsys.readouterr().err
    assert main(["prove", str(tmp_path / "s"), "--seq", "9999"]) == 2
    assert main(["verify", "--key", "ed25519:nothex", str(tmp_path / "s")]) == 2


# -- modes -----------------------------------------------------------------------------------------


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_evidence_is_private_while_written_and_read_only_once_sealed(tmp_path, key):
    from spillage.proxy.layout import create_session

    os.umask(0o022)   # what a user's shell usually has: the folder must not follow it
    assert mode(create_session(tmp_path / "runs", "x")) == 0o700
    signing = SessionKey.issue(key, "s", NOW)
    with CaptureWriter(tmp_path / "s", signing=signing, inline_limit=4) as writer:
        body = writer.body(b"a body over the inline limit")
        writer.append("error", flow=None, request=None, message="x")
        blob = tmp_path / "s" / "blobs" / body["sha256"]
        assert (mode(tmp_path / "s" / "capture.jsonl"), mode(blob), mode(blob.parent)) == (0o600, 0o600, 0o700)
        writer.append("session_end", reason="done", records=writer.count)
    write_meta(tmp_path / "s", {"status": "done"})
    assert mode(tmp_path / "s" / META_NAME) == 0o600
    seal_permissions(tmp_path / "s")
    assert {mode(p) for p in (tmp_path / "s" / "capture.jsonl", blob, tmp_path / "s" / META_NAME)} == {0o400}


def test_the_keys_are_private(tmp_path):
    from mitmproxy.options import CONF_BASENAME

    from spillage.addons.mitm import ca as ca_module
    from spillage.addons.mitm.ca import ensure_ca

    assert ca_module.CONF_BASENAME == CONF_BASENAME   # the names mitmdump looks for in its confdir

    home = tmp_path / "home"
    load_or_create_key(home)
    ca = ensure_ca(home / "ca")
    assert mode(home) == mode(home / "signing") == mode(ca.confdir) == 0o700
    assert mode(home / "signing" / "ed25519.pem") == 0o600
    assert {mode(p) for p in ca.confdir.glob("mitmproxy-ca.*")} == {0o600}



def test_the_proxy_home_is_the_ca_folder_and_a_link_elsewhere_is_replaced(tmp_path):
    from spillage.addons.mitm.ca import ensure_ca

    ca = ensure_ca(tmp_path / "home" / "ca")
    assert (ca.home / ".mitmproxy").resolve() == ca.confdir   # mitmproxy's ~/.mitmproxy under HOME=ca.home
    elsewhere = tmp_path / "user-mitmproxy"                  # say, a user's own CA and config.yaml
    elsewhere.mkdir()
    (ca.confdir / ".mitmproxy").unlink()
    (ca.confdir / ".mitmproxy").symlink_to(elsewhere)
    ensure_ca(ca.confdir)
    assert (ca.home / ".mitmproxy").resolve() == ca.confdir


def test_a_folder_where_the_ca_link_belongs_is_one_line_and_exit_2(tmp_path):
    home = tmp_path / "home"
    (home / "ca" / ".mitmproxy").mkdir(parents=True)
    done = subprocess.run([sys.executable, "-m", "spillage.runner.cli", "--home", str(home), "proxy", "start",
                           "--port", "0"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert str(home / "ca" / ".mitmproxy") in lines[0] and "expected a link" in lines[0]
    assert (home / "ca" / ".mitmproxy").is_dir() and not (tmp_path / "runs").exists()   # nothing removed, nothing started

# -- one home for the evidence format ---------------------------------------------------------------

SOURCE = Path(__file__).resolve().parents[1]


def test_only_the_layout_module_spells_a_session_file_name():
    from spillage.proxy import layout

    names = {getattr(layout, n) for n in dir(layout) if n.isupper() and isinstance(getattr(layout, n), str)}
    names -= {layout.WORK_ROOT, layout.AGENT_HOME}  # too short to search for as such; they are folders
    spelled = []
    for folder in ("proxy", "addons", "agents", "runner", "audit", "reports", "origins", "scenarios", "bench"):
        for path in (SOURCE / folder).rglob("*.py"):
            if path.name == "layout.py":
                continue
            text = path.read_text(encoding="utf-8")
            spelled += [f"{path.relative_to(SOURCE)}: {name}" for name in names
                        if f'"{name}"' in text or f"'{name}'" in text or f"/ {name!r}" in text]
    assert spelled == []
