"""Offline forgeries of issue 25, each caught by `verify` (docs/EVIDENCE.md, "What verify checks").

A session as a run leaves it (capture_helpers.runner_session: a certificate that states the agent's
isolation and that its issuer cosigns, checkpoint.note, meta.json) is cut and re-signed with its stolen
session key, moved under another folder's name, crash-sealed by a stranger, or stripped of its
signatures; verify fails each, names what is wrong, and never calls such a log clean or unsigned."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from capture_helpers import lines_of
from capture_helpers import put_lines
from capture_helpers import runner_session
from capture_helpers import signed_session
from capture_helpers import strip_signatures

from spillage.proxy.capturelog import CaptureWriter
from spillage.proxy.capturelog import iter_records
from spillage.proxy.layout import CHECKPOINT_NOTE
from spillage.proxy.layout import META_NAME
from spillage.proxy import seal as seal_module
from spillage.proxy.seal import seal_crashed
from spillage.proxy.signing import Signer
from spillage.proxy.signing import fingerprint
from spillage.proxy.signing import load_or_create_key
from spillage.proxy.signing import raw_public
from spillage.proxy.verify import CRASH_SEALED
from spillage.proxy.verify import verify


@pytest.fixture(scope="module")
def key(tmp_path_factory):
    return load_or_create_key(tmp_path_factory.mktemp("home"))


@pytest.fixture
def pin(key) -> str:
    return fingerprint(raw_public(key))


@pytest.fixture
def stranger(tmp_path_factory):
    return load_or_create_key(tmp_path_factory.mktemp("stranger"))


def meta_of(session: Path) -> dict:
    return json.loads((session / META_NAME).read_text())


def test_a_session_as_a_run_leaves_it_verifies_cosigned_with_its_isolation(tmp_path, key, pin):
    runner_session(tmp_path / "s", key, isolation="none")
    result = verify(tmp_path / "s", pin)
    assert result.ok and result.signed.cosigned and result.signed.isolation == "none"
    assert result.summary().endswith("cosigned by its issuer; agent isolation: none (the agent could reach the keys "
                                     "and the session folder while it ran)")


def cut_and_resign(session: Path, signing, keep: int) -> None:
    """What a forger holding the session key does: keep the first `keep` records (no seal among them),
    then seal and sign again with the session key."""
    lines = lines_of(session)
    put_lines(session, lines[:keep])
    with CaptureWriter.resume(session, signing.signer()) as writer:
        writer.append("session_end", reason="proxy shutdown", records=writer.count)


@pytest.mark.parametrize("meta", ["edited", "deleted", "stripped"])
@pytest.mark.parametrize("note", ["left", "deleted", "re-signed by the session key"])
def test_a_log_cut_and_resealed_with_the_stolen_session_key_fails_whatever_meta_json_says(tmp_path, key, pin,
                                                                                          meta, note):
    session = tmp_path / "s"
    signing = runner_session(session, key)
    cut_and_resign(session, signing, 9)
    final = [line.record for line in iter_records(session)][-1]
    assert verify(session, pin, alone=True).ok   # a consistent log under the session key ...
    found = meta_of(session)
    if meta == "edited":
        found["capture"] = {"records": final["seq"] + 1, "head": final["hash"],
                            "signed_head": {"seq": final["seq"], "hash": final["hash"], "tree_size": final["records"],
                                            "root": final["root"], "ts": final["ts"], "signature": final["signature"]}}
        (session / META_NAME).write_text(json.dumps(found))
    elif meta == "stripped":
        del found["capture"]
        (session / META_NAME).write_text(json.dumps(found))
    else:
        (session / META_NAME).unlink()
    if note == "deleted":
        (session / CHECKPOINT_NOTE).unlink()
    elif note.startswith("re-signed"):
        (session / CHECKPOINT_NOTE).write_text(final["note"])
    result = verify(session, pin)   # ... but not the session its issuer cosigned and meta.json recorded
    assert not result.ok and result.damage in ("modified", "not cosigned"), result.summary()


def test_a_log_whose_runner_never_cosigned_it_does_not_verify(tmp_path, key, pin):
    runner_session(tmp_path / "s", key)
    (tmp_path / "s" / CHECKPOINT_NOTE).unlink()
    result = verify(tmp_path / "s", pin)
    assert result.damage == "not cosigned" and "checkpoint.note is missing" in result.message
    (tmp_path / "s" / CHECKPOINT_NOTE).write_text(lines_of(tmp_path / "s")[-1].decode())   # not a note
    assert verify(tmp_path / "s", pin).damage == "modified"


def test_a_meta_json_that_disagrees_with_the_certificate_on_isolation_fails(tmp_path, key, pin):
    runner_session(tmp_path / "s", key, isolation="none")
    meta = meta_of(tmp_path / "s")
    meta["isolation"] = {"level": "sandbox"}
    (tmp_path / "s" / META_NAME).write_text(json.dumps(meta))
    result = verify(tmp_path / "s", pin)
    assert result.damage == "modified" and "the certificate says 'none'" in result.message


def test_files_under_another_folders_name_say_which_session_they_are(tmp_path, key, pin):
    runner_session(tmp_path / "clean", key)
    shutil.copytree(tmp_path / "clean", tmp_path / "leaky")
    result = verify(tmp_path / "leaky", pin)
    assert result.damage == "wrong session"
    assert result.message == "these are the files of session clean (the name its key is certified for), not of leaky"
    meta = meta_of(tmp_path / "clean")
    meta["session"] = "leaky"
    (tmp_path / "clean" / META_NAME).write_text(json.dumps(meta))
    assert verify(tmp_path / "clean", pin).message == "meta.json names session 'leaky'; the log is session clean's"


def crashed(session: Path, key) -> None:
    signed_session(session, key, seal=False)


def test_a_crash_seal_names_the_key_that_signed_it_and_the_pin_fails_a_strangers(tmp_path, key, pin, stranger):
    crashed(tmp_path / "s", key)
    seal_crashed(tmp_path / "s", Signer(stranger), "spillage seal", "cut by someone holding the folder")
    other = fingerprint(raw_public(stranger))
    result = verify(tmp_path / "s")
    assert result.damage == CRASH_SEALED and f"key {other}" in result.message
    pinned = verify(tmp_path / "s", pin)
    assert pinned.damage == "wrong key" and pinned.message.startswith(f"sealed after crash by {other}, not by the pinned {pin}")
    assert verify(tmp_path / "s", other).damage == "wrong key"   # its session key is still certified by `key`


def test_a_crash_seal_that_claims_another_sealer_than_its_signer_fails(tmp_path, key, pin, stranger, monkeypatch):
    crashed(tmp_path / "s", key)
    claimed = seal_module.sealer_identity
    monkeypatch.setattr(seal_module, "sealer_identity", lambda tool, signer: {**claimed(tool, signer), "key": pin})
    seal_crashed(tmp_path / "s", Signer(stranger), "spillage seal", "cut")   # signed by the stranger, claiming pin
    result = verify(tmp_path / "s")
    assert result.damage == "bad signature"
    assert result.message == f"the crash seal says {pin} sealed it, but {fingerprint(raw_public(stranger))} signed its checkpoint"


@pytest.mark.parametrize("named_by", ["session_start", "meta.json", "checkpoint.note"])
def test_a_log_stripped_of_its_signatures_is_never_reported_unsigned(tmp_path, key, named_by):
    session = tmp_path / "s"
    runner_session(session, key)
    strip_signatures(session, keep_signed_claim=named_by == "session_start")
    meta = meta_of(session)
    meta.pop("capture")
    if named_by != "meta.json":
        meta.pop("signing")
    (session / META_NAME).write_text(json.dumps(meta))
    if named_by != "checkpoint.note":
        (session / CHECKPOINT_NOTE).unlink()
    result = verify(session)
    assert result.damage == "bad signature" and "they were stripped" in result.message, result.summary()
    assert "unsigned" not in result.summary()


def test_audit_runs_flags_a_session_planted_under_another_name(tmp_path, key, capsys):
    from spillage.runner.cli import main

    runner_session(tmp_path / "runs" / "clean", key)
    shutil.copytree(tmp_path / "runs" / "clean", tmp_path / "runs" / "planted")
    assert main(["audit", str(tmp_path / "runs")]) == 1
    lines = capsys.readouterr().out.splitlines()
    planted = next(line for line in lines if line.startswith(str(tmp_path / "runs" / "planted")))
    assert "\tFAILED\t" in planted and "wrong session: these are the files of session clean" in planted
