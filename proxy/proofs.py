"""Inclusion and consistency proofs over a signed capture log (`spillage prove`, `spillage verify-proof`).

An inclusion proof carries one record, its RFC 9162 audit path, the log's final signed tree head and
the `signer` record that certifies the key which signed it: checked with nothing else at hand, it shows
that the record is in the session's log as its proxy sealed it, without showing the rest of the session.
A consistency proof shows that a later signed head of the log extends an earlier one.

An inclusion proof is also written as a c2sp.org/tlog-proof (`--format tlog-proof`): the record's line as
its extra data, the leaf index, the audit path, and the session's final checkpoint as its issuer cosigned
it (checkpoint.note). Any tlog-proof verifier checks it with the issuer's verifier key alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spillage.proxy.capturelog import MAX_LINE_BYTES
from spillage.proxy.capturelog import Line
from spillage.proxy.capturelog import canonical_json
from spillage.proxy.capturelog import iter_records
from spillage.proxy.capturelog import record_hash
from spillage.proxy.documents import DocumentError
from spillage.proxy.documents import load_json
from spillage.proxy.documents import read_text
from spillage.proxy.layout import capture_path
from spillage.proxy.layout import read_checkpoint_note
from spillage.proxy.merkle import consistency_proof
from spillage.proxy.merkle import inclusion_proof
from spillage.proxy.merkle import leaf_hash
from spillage.proxy.merkle import verify_consistency
from spillage.proxy.merkle import verify_inclusion
from spillage.proxy.notes import PROOF_HEADER
from spillage.proxy.notes import NoteError
from spillage.proxy.notes import TlogProof
from spillage.proxy.notes import long_term_name
from spillage.proxy.notes import origin
from spillage.proxy.notes import parse_checkpoint
from spillage.proxy.notes import parse_note
from spillage.proxy.notes import parse_tlog_proof
from spillage.proxy.signing import b64
from spillage.proxy.signing import certificate_ok
from spillage.proxy.signing import checkpoint_message
from spillage.proxy.signing import fingerprint
from spillage.proxy.signing import note_signed
from spillage.proxy.signing import pinned_fingerprint
from spillage.proxy.signing import pinned_public
from spillage.proxy.signing import signature_ok
from spillage.proxy.signing import unb64
from spillage.proxy.verify import VerifyResult
from spillage.proxy.verify import verify

PROOF_FORMAT = "spillage-proof"
FORMATS = (PROOF_FORMAT, "tlog-proof")
PROOF_VERSION = 1
HEAD_FIELDS = ("records", "root", "ts", "key", "signature")
SIGNER_FIELDS = ("session", "key", "issuer", "issued", "certificate")


class ProofError(Exception):
    """A proof that cannot be made (the log does not verify) or read."""


class ProofRequestError(ProofError):
    """A proof asked of what the log does not hold: an unsigned log, no such record or signed head."""


@dataclass(frozen=True)
class SignedLog:
    """What proofs are cut from: every leaf hash, the records' kinds, the signer and the signed heads."""

    leaves: list[bytes]
    signer: dict
    heads: dict[int, dict]      # tree size -> checkpoint fields that sign it
    final: int                  # tree size of the final checkpoint
    lines: dict[int, Line]      # seq -> the record's line (only the ones asked for)

    def covers(self, seq: int) -> None:
        """ProofRequestError unless the final signed head covers record `seq`."""
        if not 0 <= seq < self.final:
            raise ProofRequestError(f"seq {seq}: the final signed head covers records 0 to {self.final - 1}")


def read_signed_log(session: Path, key: str | None, keep: Iterable[int] = ()) -> SignedLog:
    """The signed log of `session`, which must verify (pinned to `key` when given), with the lines of
    the records `keep`."""
    return signed_log(session, verify(session, key), iter_records(session), keep)


def signed_log(session: Path, result: VerifyResult, lines: Iterable[Line], keep: Iterable[int] = ()) -> SignedLog:
    """The signed log of `session` from its verification `result` and its `lines` (read once by the
    caller), with the lines of the records `keep`; ProofError unless it verified and is signed."""
    if not result.ok:
        raise ProofError(f"the log does not verify: {result.summary()}")
    if result.signed is None:
        raise ProofRequestError(f"{capture_path(session)}: the log is unsigned, so nothing can be proved from it")
    leaves, heads, signer, kept, keep = [], {}, {}, {}, set(keep)
    for line in lines:
        rec = line.record
        if rec["kind"] == "signer":
            signer = {k: rec[k] for k in SIGNER_FIELDS}
        if rec["kind"] == "checkpoint":
            heads[rec["records"]] = {k: rec[k] for k in HEAD_FIELDS}
        if rec["seq"] in keep:
            kept[rec["seq"]] = line
        leaves.append(leaf_hash(line.raw))
    return SignedLog(leaves, signer, heads, max(heads), kept)


def prove_inclusion(session: Path, seq: int, key: str | None = None) -> dict[str, Any]:
    """The inclusion proof of record `seq` under the log's final signed head."""
    return prove_inclusions(session, [seq], key)[seq]


def prove_inclusions(session: Path, seqs: Iterable[int], key: str | None = None) -> dict[int, dict[str, Any]]:
    """seq → the inclusion proof of that record under the log's final signed head, for every one of
    `seqs`, reading the log once."""
    seqs = sorted(set(seqs))
    return inclusions(read_signed_log(session, key, keep=seqs), seqs)


def inclusions(log: SignedLog, seqs: Iterable[int]) -> dict[int, dict[str, Any]]:
    """seq → the inclusion proof of that record of `log` (which kept its line) under the final signed head."""
    seqs = sorted(set(seqs))
    for seq in seqs:
        log.covers(seq)
    return {seq: {"format": PROOF_FORMAT, "version": PROOF_VERSION, "type": "inclusion",
                  "record": log.lines[seq].record, "leaf_index": seq,
                  "audit_path": [h.hex() for h in inclusion_proof(log.leaves, seq, log.final)],
                  "signed_head": log.heads[log.final], "signer": log.signer} for seq in seqs}


def proof_json(proof: dict[str, Any]) -> str:
    """A spillage-proof as the file `spillage prove` writes."""
    return json.dumps(proof, indent=1, ensure_ascii=False) + "\n"


def prove_tlog(session: Path, seq: int, key: str | None = None) -> str:
    """The inclusion proof of record `seq` as a c2sp.org/tlog-proof, under the final checkpoint its issuer
    cosigned."""
    log = read_signed_log(session, key, keep=[seq])
    log.covers(seq)
    note = read_checkpoint_note(session)
    if note is None:
        raise ProofRequestError(f"{session}: no cosigned checkpoint.note (the log predates C2SP checkpoints); "
                                f"--format {PROOF_FORMAT} proves it")
    path = inclusion_proof(log.leaves, seq, log.final)
    return TlogProof(log.lines[seq].raw, seq, path, note).encode()


def check_tlog_proof(text: str, key: str | None) -> tuple[bool, str]:
    """(ok, the verdict line) for a c2sp.org/tlog-proof of one record; `key` (required) is the issuer's
    public key, which the checkpoint's cosignature must verify under. ProofError when it is no proof."""
    if key is None:
        raise ProofError("a tlog-proof names no key: give --key (the verifier key `spillage key` prints)")
    issuer = pinned_public(key)
    try:
        proof = parse_tlog_proof(text)
        note = parse_note(proof.checkpoint)
        origin_line, size, root = parse_checkpoint(note.text)
    except NoteError as exc:
        raise ProofError(f"not a tlog-proof: {exc}") from None
    if not origin_line.startswith(origin("")):
        return False, f"FAIL the checkpoint's origin {origin_line!r} names no spillage session"
    if note_signed(note, long_term_name(issuer), b64(issuer)) is not True:
        return False, f"FAIL the checkpoint carries no valid signature of {fingerprint(issuer)}"
    if proof.extra is None:
        return False, "FAIL the proof carries no record (its extra line)"
    try:
        record = json.loads(proof.extra)
        if not isinstance(record, dict) or canonical_json(record) != proof.extra or record.get("hash") != record_hash(record):
            return False, "FAIL the record is not a capture record as the log holds it"
    except (ValueError, TypeError, RecursionError):
        return False, "FAIL the record is not JSON"
    if record.get("seq") != proof.index or not verify_inclusion(leaf_hash(proof.extra), proof.index, size, proof.path, root):
        return False, "FAIL the audit path does not lead from the record to the checkpoint's root"
    session = origin_line[len(origin("")):]
    return True, (f"OK record {proof.index} ({record.get('kind')}{_what(record)}) is in session {session}'s log of "
                  f"{size} records; cosigned by {fingerprint(issuer)} (pinned)")


def prove_consistency(session: Path, old: int, new: int, key: str | None = None) -> dict[str, Any]:
    """The proof that the log's signed head at tree size `new` extends the one at `old`."""
    log = read_signed_log(session, key)
    sizes = sorted(log.heads)
    for size in (old, new):
        if size not in log.heads:
            raise ProofRequestError(f"--consistency {old} {new}: no signed head of tree size {size}; this log's are "
                                    f"{', '.join(map(str, sizes))}")
    if not 0 < old <= new:
        raise ProofRequestError(f"--consistency A B needs 0 < A <= B, got {old} and {new}")
    path = consistency_proof(log.leaves, old, new)
    return {"format": PROOF_FORMAT, "version": PROOF_VERSION, "type": "consistency",
            "old_head": log.heads[old], "new_head": log.heads[new],
            "proof": [h.hex() for h in path], "signer": log.signer}


MAX_PROOF_BYTES = 2 * MAX_LINE_BYTES  # the record's line, and a few hundred hashes
TLOG_PROOF_HEADER = PROOF_HEADER.encode("ascii") + b"\n"


def read_proof(path: Path, key: str | None) -> tuple[bool, str]:
    """(ok, the verdict line) for a proof file of either format; ProofError naming the file when it is
    not a proof."""
    try:
        with open(path, "rb") as f:
            start = f.read(len(TLOG_PROOF_HEADER))
    except OSError as exc:
        raise ProofError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if start != TLOG_PROOF_HEADER:
        return check_proof(load_proof(path), key)
    try:
        text = read_text(Path(path), MAX_PROOF_BYTES, "tlog-proof")
    except DocumentError as exc:
        raise ProofError(str(exc)) from None
    try:
        return check_tlog_proof(text, key)
    except ProofError as exc:
        raise ProofError(f"{path}: {exc}") from None


def load_proof(path: Path) -> dict[str, Any]:
    """A proof file's JSON; ProofError naming the file when it is not one."""
    try:
        proof = load_json(Path(path), MAX_PROOF_BYTES, "proof file")
    except DocumentError as exc:
        raise ProofError(str(exc)) from None
    if not isinstance(proof, dict) or proof.get("format") != PROOF_FORMAT:
        raise ProofError(f"{path}: not a {PROOF_FORMAT} file")
    if proof.get("version") != PROOF_VERSION or proof.get("type") not in ("inclusion", "consistency"):
        raise ProofError(f"{path}: unknown proof version or type")
    return proof


def _hashes(values: Any) -> list[bytes] | None:
    if not isinstance(values, list):
        return None
    try:
        out = [bytes.fromhex(v) for v in values]
    except (TypeError, ValueError):
        return None
    return out if all(len(h) == 32 for h in out) else None


def _head_ok(signer: dict, head: Any) -> tuple[bool, str]:
    """Whether `head` is a tree head signed by the session key that `signer` certifies."""
    if not isinstance(head, dict) or not isinstance(head.get("records"), int):
        return False, "the signed head is malformed"
    if head.get("key") != signer.get("key"):
        return False, "the head is not signed by the certified session key"
    message = checkpoint_message(str(signer.get("session")), head["records"], str(head.get("root")),
                                 str(head.get("ts")))
    if not signature_ok(head.get("key"), head.get("signature"), message):
        return False, "the head's signature does not verify"
    return True, ""


def check_proof(proof: dict[str, Any], key: str | None = None) -> tuple[bool, str]:
    """(ok, the verdict line) for a proof read by `load_proof`; `key` pins the certifying key."""
    signer = proof.get("signer")
    if not isinstance(signer, dict) or not certificate_ok(signer):
        return False, "FAIL the session key's certificate does not verify"
    issuer = fingerprint(unb64(signer.get("issuer")) or b"")
    pin = pinned_fingerprint(key) if key is not None else None
    if pin is not None and issuer != pin:
        return False, f"FAIL certified by {issuer}, not by the pinned {pin}"
    by = f"signed by {issuer} ({'pinned' if pin else 'not pinned: --key checks whose key it is'})"
    if proof["type"] == "consistency":
        return _check_consistency(proof, signer, by)
    head = proof.get("signed_head")
    ok, why = _head_ok(signer, head)
    if not ok:
        return False, f"FAIL {why}"
    record, path, index = proof.get("record"), _hashes(proof.get("audit_path")), proof.get("leaf_index")
    if not isinstance(record, dict) or path is None or not isinstance(index, int) or record.get("seq") != index:
        return False, "FAIL the proof's record, leaf index or audit path is malformed"
    try:
        if record.get("hash") != record_hash(record):
            return False, "FAIL the record's hash does not match its content"
        leaf = leaf_hash(canonical_json(record))
    except (TypeError, ValueError):
        return False, "FAIL the record has no canonical encoding"
    root = bytes.fromhex(head["root"]) if isinstance(head.get("root"), str) and len(head["root"]) == 64 else b""
    if not verify_inclusion(leaf, index, head["records"], path, root):
        return False, "FAIL the audit path does not lead from the record to the signed root"
    return True, (f"OK record {index} ({record.get('kind')}{_what(record)}) is in session "
                  f"{signer['session']}'s log of {head['records']} records signed at {head['ts']}; {by}")


def _what(record: dict) -> str:
    url = record.get("url")
    return f" {url}" if isinstance(url, str) else ""


def _check_consistency(proof: dict, signer: dict, by: str) -> tuple[bool, str]:
    old, new, path = proof.get("old_head"), proof.get("new_head"), _hashes(proof.get("proof"))
    for head in (old, new):
        ok, why = _head_ok(signer, head)
        if not ok:
            return False, f"FAIL {why}"
    if path is None:
        return False, "FAIL the consistency path is malformed"
    try:
        old_root, new_root = bytes.fromhex(old["root"]), bytes.fromhex(new["root"])
    except (TypeError, ValueError):
        return False, "FAIL a signed head's root is not hex"
    if not verify_consistency(old["records"], new["records"], old_root, new_root, path):
        return False, "FAIL the later head does not extend the earlier one"
    return True, (f"OK session {signer['session']}: the signed head of {new['records']} records extends "
                  f"the one of {old['records']}; {by}")
