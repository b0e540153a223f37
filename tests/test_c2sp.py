"""Checkpoints and proofs in the formats transparency logs use (C2SP signed note, tlog-checkpoint,
tlog-proof), checked by code we did not write: the signed-note spec's own example, transparency-dev's
published Merkle test vectors (tests/vectors/), and Go's golang.org/x/mod/sumdb/note and sumdb/tlog,
built offline from Debian's golang-golang-x-mod-dev into a small program of ours (tests/tlogcheck/)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path

import pytest
from capture_helpers import signed_session
from traffic import browse

from spillage.proxy.capturelog import iter_records
from spillage.proxy.layout import CHECKPOINT_NOTE
from spillage.proxy.merkle import verify_consistency
from spillage.proxy.merkle import verify_inclusion
from spillage.addons.mitm.ca import ensure_ca
from spillage.proxy.notes import NoteError
from spillage.proxy.notes import checkpoint_text
from spillage.proxy.notes import long_term_name
from spillage.proxy.notes import origin
from spillage.proxy.notes import parse_checkpoint
from spillage.proxy.notes import parse_note
from spillage.proxy.notes import parse_verifier_key
from spillage.proxy.notes import verifier_key
from spillage.proxy.proofs import ProofError
from spillage.proxy.proofs import check_tlog_proof
from spillage.proxy.proofs import prove_consistency
from spillage.proxy.proofs import prove_tlog
from spillage.proxy.signing import load_or_create_key
from spillage.proxy.signing import note_signed
from spillage.proxy.signing import raw_public
from spillage.proxy.signing import b64
from spillage.runner.cli import main
from spillage.runner.heads import describe_evidence
from spillage.runner.stack import Stack

VECTORS = json.loads((Path(__file__).with_name("vectors") / "transparency-dev-merkle.json").read_text())
TLOGCHECK = Path(__file__).with_name("tlogcheck") / "main.go"
GO_SOURCES = Path("/usr/share/gocode")   # Debian's golang-golang-x-mod-dev
# The signed-note spec's example (c2sp.org/signed-note, "Verifier keys"): its vkey and the note it verifies.
SPEC_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
SPEC_NOTE = ("This is an example message.\n\n\u2014 example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONnc"
             "AlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n")


def unb(text: str | None) -> bytes:
    return base64.b64decode(text) if text else b""


def test_the_signed_note_specs_example_verifies_with_our_code():
    name, public = parse_verifier_key(SPEC_VKEY)
    assert verifier_key(name, public) == SPEC_VKEY   # key ID = SHA-256(name || 0x0A || 0x01 || key)[:4]
    note = parse_note(SPEC_NOTE)
    assert note.text == "This is an example message.\n"
    assert note_signed(note, name, b64(public)) is True
    assert note_signed(parse_note(SPEC_NOTE.replace("example message", "example massage")), name, b64(public)) is False
    with pytest.raises(NoteError):
        parse_verifier_key(SPEC_VKEY.replace("+530d903a+", "+530d903b+"))


@pytest.mark.parametrize("case", VECTORS["inclusion"], ids=lambda c: c["file"].split("testdata/")[1])
def test_inclusion_proofs_against_transparency_devs_vectors(case):
    ours = verify_inclusion(unb(case["leafHash"]), case["leafIdx"], case["treeSize"],
                            [unb(h) for h in case["proof"] or []], unb(case["root"]))
    assert ours == (not case["wantErr"])


@pytest.mark.parametrize("case", VECTORS["consistency"], ids=lambda c: c["file"].split("testdata/")[1])
def test_consistency_proofs_against_transparency_devs_vectors(case):
    root1, root2 = unb(case["root1"]), unb(case["root2"])
    ours = verify_consistency(case["size1"], case["size2"], root1, root2, [unb(h) for h in case["proof"] or []])
    # Stricter than transparency-dev in two cases it accepts: an old tree of size 0 (0 -> 0 proves nothing)
    # and equal sizes whose roots are equal but no SHA-256 hash ("don't care"); we refuse both.
    assert ours == (not case["wantErr"] and case["size1"] > 0 and len(root1) == len(root2) == 32)


def test_every_checkpoint_is_a_tlog_checkpoint_note_its_own_key_signed(tmp_path):
    key = load_or_create_key(tmp_path / "home")
    signing = signed_session(tmp_path / "s", key)
    checkpoints = [line.record for line in iter_records(tmp_path / "s") if line.record["kind"] == "checkpoint"]
    assert len(checkpoints) >= 3
    for record in checkpoints:
        note = parse_note(record["note"])
        assert parse_checkpoint(note.text) == (origin("s"), record["records"], bytes.fromhex(record["root"]))
        assert note.text == checkpoint_text("s", record["records"], bytes.fromhex(record["root"]))
        assert note_signed(note, origin("s"), signing.key) is True
        assert [s.name for s in note.signatures] == ["spillage/s"]


# --- Go's sumdb/note and sumdb/tlog -------------------------------------------------------------


@pytest.fixture(scope="module")
def tlogcheck(tmp_path_factory) -> Path:
    """tests/tlogcheck built offline against Debian's golang.org/x/mod (GOPATH mode: no module download)."""
    build = tmp_path_factory.mktemp("tlogcheck")
    program = build / "tlogcheck"
    env = {**os.environ, "GOPATH": str(GO_SOURCES), "GO111MODULE": "off", "GOCACHE": str(build / "cache"),
           "GOFLAGS": "", "GOPROXY": "off"}
    done = subprocess.run(["go", "build", "-o", str(program), str(TLOGCHECK)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return program


@pytest.fixture(scope="module")
def session(tmp_path_factory, catalog_file) -> tuple[Path, bytes]:
    """A real sealed session (the proxy, the origins, a browse of both sites), settled and cosigned by the
    runner's code, with meta.json; and the long-term public key."""
    home = tmp_path_factory.mktemp("home")
    folder = tmp_path_factory.mktemp("runs") / "c2sp-session"
    folder.mkdir()
    stack = Stack(folder, ensure_ca(home / "ca"), load_or_create_key(home), catalog=catalog_file, log=lambda m: None)
    with stack:
        browse(stack.proxy_url)
    assert stack.settlement.ok, stack.settlement.detail
    meta = {"session": folder.name, "signing": {"key": stack.key_fingerprint}}
    describe_evidence(meta, stack.settlement)
    (folder / "meta.json").write_text(json.dumps(meta))
    return folder, raw_public(stack.signing_key)


def go(tlogcheck: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(tlogcheck), *args], capture_output=True, text=True)


def long_term_vkey(public: bytes) -> str:
    return verifier_key(long_term_name(public), public)


@pytest.mark.e2e
@pytest.mark.needs_tool("go")
def test_go_opens_the_cosigned_checkpoint_and_every_checkpoints_note(tlogcheck, session, tmp_path):
    folder, public = session
    opened = go(tlogcheck, "note", long_term_vkey(public), str(folder / CHECKPOINT_NOTE))
    assert opened.returncode == 0, opened.stderr
    final = [line.record for line in iter_records(folder)][-1]
    assert opened.stdout == checkpoint_text(folder.name, final["records"], bytes.fromhex(final["root"]))
    records = [line.record for line in iter_records(folder)]
    session_vkey = verifier_key(origin(folder.name), base64.b64decode(records[0]["key"]))
    for record in (r for r in records if r["kind"] == "checkpoint"):
        (tmp_path / "note").write_text(record["note"])
        assert go(tlogcheck, "note", session_vkey, str(tmp_path / "note")).returncode == 0
    stranger = raw_public(load_or_create_key(tmp_path / "stranger"))
    refused = go(tlogcheck, "note", long_term_vkey(stranger), str(folder / CHECKPOINT_NOTE))
    assert refused.returncode == 1 and "note" in refused.stderr


@pytest.mark.e2e
@pytest.mark.needs_tool("go")
def test_go_checks_our_tlog_proofs_of_every_record_and_refuses_altered_ones(tlogcheck, session, tmp_path):
    folder, public = session
    vkey = long_term_vkey(public)
    lines = {line.record["seq"]: line.raw for line in iter_records(folder)}
    proof_file = tmp_path / "leak.tlog-proof"
    for seq in range(len(lines) - 1):
        proof_file.write_text(prove_tlog(folder, seq))
        checked = go(tlogcheck, "proof", vkey, origin(folder.name), str(proof_file))
        assert checked.returncode == 0, checked.stderr
        assert checked.stdout.splitlines()[1].encode() == lines[seq]
        assert check_tlog_proof(proof_file.read_text(), vkey)[0]
    text = prove_tlog(folder, 3)
    head, _, checkpoint = text.partition("\n\n")
    altered = {
        "another index": text.replace("\nindex 3\n", "\nindex 4\n"),
        "a hash of the path": head.replace(head.splitlines()[3], base64.b64encode(b"\0" * 32).decode()) + "\n\n"
        + checkpoint,
        "another record": head.replace(head.splitlines()[1], "extra " + base64.b64encode(lines[4]).decode())
        + "\n\n" + checkpoint,
        "another origin": text.replace(f"\n{origin(folder.name)}\n", "\nspillage/another\n"),
        "no cosignature": text.rsplit("\u2014 spillage/key/", 1)[0],
    }
    for what, forged in altered.items():
        proof_file.write_text(forged)
        assert go(tlogcheck, "proof", vkey, origin(folder.name), str(proof_file)).returncode == 1, what
        try:
            assert not check_tlog_proof(forged, vkey)[0], what
        except ProofError:
            pass   # no longer a proof at all


@pytest.mark.e2e
@pytest.mark.needs_tool("go")
def test_go_checks_our_consistency_proofs_between_signed_heads(tlogcheck, session):
    folder, _ = session
    heads = [line.record for line in iter_records(folder) if line.record["kind"] == "checkpoint"]
    assert len(heads) >= 2
    for old in heads:
        for new in heads:
            if old["records"] <= new["records"]:
                proof = prove_consistency(folder, old["records"], new["records"])
                path = [base64.b64encode(bytes.fromhex(h)).decode() for h in proof["proof"]]
                args = [str(old["records"]), b64(bytes.fromhex(old["root"])), str(new["records"]),
                        b64(bytes.fromhex(new["root"])), *path]
                checked = go(tlogcheck, "tree", *args)
                assert checked.returncode == 0, (old["records"], new["records"], checked.stderr)
                if path:   # one bit of one hash changed
                    flipped = bytearray(base64.b64decode(path[0]))
                    flipped[0] ^= 1
                    assert go(tlogcheck, "tree", *args[:4], b64(bytes(flipped)), *path[1:]).returncode == 1


@pytest.mark.e2e
def test_prove_writes_a_tlog_proof_that_verify_proof_checks_with_the_key_spillage_key_prints(session, tmp_path, capsys):
    folder, public = session
    out = tmp_path / "leak.tlog-proof"
    assert main(["prove", str(folder), "--seq", "3", "--format", "tlog-proof", "--out", str(out)]) == 0
    assert out.read_text().startswith("c2sp.org/tlog-proof@v1\nextra ")
    capsys.readouterr()
    assert main(["verify-proof", str(out), "--key", long_term_vkey(public)]) == 0
    assert capsys.readouterr().out.startswith(f"OK {out}: record 3 (")
    assert main(["verify-proof", str(out)]) == 2   # a tlog-proof names no key
    assert main(["verify-proof", str(out), "--key", "ed25519:" + "0" * 64]) == 2   # a fingerprint checks nothing
    stranger = raw_public(load_or_create_key(tmp_path / "stranger"))
    assert main(["verify-proof", str(out), "--key", long_term_vkey(stranger)]) == 1
    assert main(["prove", str(folder), "--consistency", "1", "2", "--format", "tlog-proof"]) == 2
