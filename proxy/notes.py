"""C2SP signed notes, `tlog-checkpoint` and `tlog-proof` (c2sp.org/signed-note, c2sp.org/tlog-checkpoint,
c2sp.org/tlog-proof): the formats transparency logs use, which Go's golang.org/x/mod/sumdb/note reads.

Every signed checkpoint of a capture log is also such a note, signed by the same Ed25519 key:

    spillage/<session>                    the origin line: it names the session
    1234                                  the tree size: the records the head covers
    3q2+7w==...                           the RFC 6962 root, base64

    — spillage/<session> <base64(key ID || signature)>

A session key signs under the origin as its key name; a long-term key under `spillage/key/<the first 16
hex digits of its fingerprint>`. Key IDs are SHA-256(key name || 0x0A || 0x01 || public key)[:4].
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass


ORIGIN_PREFIX = "spillage/"
KEY_NAME_PREFIX = "spillage/key/"
ED25519 = b"\x01"
SIGNATURE_PREFIX = "\u2014 "                      # an em dash and a space
PROOF_HEADER = "c2sp.org/tlog-proof@v1"
MAX_NOTE_BYTES = 64 << 10
MAX_SIGNATURES = 16
_NAME = re.compile(r"[^\s+]+")


class NoteError(ValueError):
    """Text that is not a well-formed note, checkpoint or proof; the message says what is wrong."""


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def origin(session: str) -> str:
    """The origin line of a session's checkpoints."""
    return ORIGIN_PREFIX + session


def long_term_name(public_raw: bytes) -> str:
    """The key name a long-term key signs notes under."""
    return KEY_NAME_PREFIX + hashlib.sha256(public_raw).hexdigest()[:16]   # as its fingerprint begins


def key_id(name: str, public_raw: bytes) -> bytes:
    """The signed-note key ID of an Ed25519 key: SHA-256(name || 0x0A || 0x01 || key)[:4]."""
    return hashlib.sha256(name.encode("utf-8") + b"\n" + ED25519 + public_raw).digest()[:4]


def verifier_key(name: str, public_raw: bytes) -> str:
    """The note verifier key (`vkey`): name+hex(key ID)+base64(0x01 || public key)."""
    return f"{name}+{key_id(name, public_raw).hex()}+{b64(ED25519 + public_raw)}"


def parse_verifier_key(vkey: str) -> tuple[str, bytes]:
    """(name, raw public key) of an Ed25519 vkey; NoteError when it is none."""
    name, _, rest = vkey.partition("+")
    hex_id, _, key = rest.partition("+")
    try:
        raw = base64.b64decode(key, validate=True)
        claimed = bytes.fromhex(hex_id)
    except (binascii.Error, ValueError):
        raise NoteError(f"{vkey!r}: not a note verifier key (name+keyid+base64 key)") from None
    if not _NAME.fullmatch(name) or len(raw) != 33 or raw[:1] != ED25519 or claimed != key_id(name, raw[1:]):
        raise NoteError(f"{vkey!r}: not an Ed25519 note verifier key with its own key ID")
    return name, raw[1:]


def checkpoint_text(session: str, tree_size: int, root: bytes) -> str:
    """The tlog-checkpoint note text of a tree head of `session`'s log."""
    return f"{origin(session)}\n{tree_size}\n{b64(root)}\n"


@dataclass(frozen=True)
class Signature:
    """One signature line of a note: the key name, the key ID, the signature bytes."""

    name: str
    key_id: bytes
    signature: bytes


@dataclass(frozen=True)
class Note:
    """A signed note split into its text and its signature lines (none verified yet)."""

    text: str
    signatures: tuple[Signature, ...]

    def encode(self) -> str:
        lines = "".join(f"{SIGNATURE_PREFIX}{s.name} {b64(s.key_id + s.signature)}\n" for s in self.signatures)
        return f"{self.text}\n{lines}"

    def adding(self, signature: Signature) -> Note:
        """This note with `signature` too (replacing one of the same key)."""
        kept = tuple(s for s in self.signatures if (s.name, s.key_id) != (signature.name, signature.key_id))
        return Note(self.text, (*kept, signature))

    def by(self, name: str, public_raw: bytes) -> Signature | None:
        """The signature of the key `name`/`public_raw` (matched by name and key ID), if there is one."""
        wanted = key_id(name, public_raw)
        return next((s for s in self.signatures if s.name == name and s.key_id == wanted), None)


def parse_note(data: str) -> Note:
    """A note's text and signature lines, as the signed-note spec lays them out; NoteError if malformed."""
    if len(data.encode("utf-8", "surrogatepass")) > MAX_NOTE_BYTES:
        raise NoteError(f"a note of more than {MAX_NOTE_BYTES} bytes")
    if any(c < " " and c != "\n" for c in data) or not data.endswith("\n"):
        raise NoteError("a note holds no control character but newlines, and ends in one")
    split = data.rfind("\n\n")
    if split < 0:
        raise NoteError("no blank line before the signatures")
    text, lines = data[:split + 1], data[split + 2:].splitlines()
    if not lines or len(lines) > MAX_SIGNATURES:
        raise NoteError(f"a note carries 1 to {MAX_SIGNATURES} signature lines")
    signatures = []
    for line in lines:
        name, _, encoded = line.removeprefix(SIGNATURE_PREFIX).partition(" ")
        try:
            raw = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if not line.startswith(SIGNATURE_PREFIX) or not _NAME.fullmatch(name) or len(raw) < 5:
            raise NoteError(f"not a signature line: {line[:80]!r}")
        signatures.append(Signature(name, raw[:4], raw[4:]))
    return Note(text, tuple(signatures))


def parse_checkpoint(text: str) -> tuple[str, int, bytes]:
    """(origin, tree size, root) of a tlog-checkpoint note text; NoteError when it is not one."""
    lines = text.split("\n")
    if len(lines) < 4 or lines[-1] != "" or not all(lines[:-1]):
        raise NoteError("a checkpoint is at least three non-empty lines")
    size = lines[1]
    try:
        root = base64.b64decode(lines[2], validate=True)
    except (binascii.Error, ValueError):
        root = b""
    if not size.isdigit() or (size != "0" and size.startswith("0")) or len(root) != 32:
        raise NoteError("a checkpoint's second line is its tree size, its third its base64 SHA-256 root")
    return lines[0], int(size), root


@dataclass(frozen=True)
class TlogProof:
    """A c2sp.org/tlog-proof: extra data, the leaf index, its audit path and the checkpoint note."""

    extra: bytes | None
    index: int
    path: list[bytes]
    checkpoint: str

    def encode(self) -> str:
        lines = [PROOF_HEADER]
        if self.extra is not None:
            lines.append(f"extra {b64(self.extra)}")
        lines += [f"index {self.index}", *(b64(h) for h in self.path), ""]
        return "\n".join(lines) + "\n" + self.checkpoint


def parse_tlog_proof(data: str) -> TlogProof:
    """A tlog-proof's parts; NoteError when it is not one (the checkpoint is checked by its reader)."""
    head, sep, checkpoint = data.partition("\n\n")
    lines = head.split("\n")
    if not sep or lines[0] != PROOF_HEADER:
        raise NoteError(f"not a tlog-proof: it starts with {PROOF_HEADER} and holds a blank line")
    extra = None
    rest = lines[1:]
    if rest and rest[0].startswith("extra "):
        try:
            extra = base64.b64decode(rest[0][6:], validate=True)
        except (binascii.Error, ValueError):
            raise NoteError("the extra line is not base64") from None
        rest = rest[1:]
    if not rest or not rest[0].startswith("index ") or not re.fullmatch(r"0|[1-9][0-9]*", rest[0][6:]):
        raise NoteError("the index line is missing or not a decimal number")
    path = []
    for line in rest[1:]:
        try:
            node = base64.b64decode(line, validate=True)
        except (binascii.Error, ValueError):
            node = b""
        if len(node) != 32:
            raise NoteError(f"not a base64 SHA-256 hash in the inclusion proof: {line[:60]!r}")
        path.append(node)
    return TlogProof(extra, int(rest[0][6:]), path, checkpoint)
