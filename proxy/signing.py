"""Ed25519 keys and the messages they sign (docs/EVIDENCE.md).

The long-term key lives in the spillage home (`signing/ed25519.pem`, 0600, in a 0700 folder) and is
made on first use. It never signs a checkpoint of a live capture: for each session the runner makes a
fresh key, certifies it with the long-term key (the `signer` record), and hands the session key to the
proxy over a pipe, so that it lives only in the proxy's memory. Checkpoints are signed with it.
Whoever seals a crashed log (`spillage seal`) signs that log's last checkpoint with their long-term key.

Signed messages are canonical JSON objects with a `purpose`, so a signature made for one kind of
message can never be replayed as another.
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from spillage.proxy.documents import DocumentError
from spillage.proxy.documents import read_text
from spillage.proxy.notes import Note
from spillage.proxy.notes import NoteError
from spillage.proxy.notes import Signature
from spillage.proxy.notes import key_id
from spillage.proxy.notes import long_term_name
from spillage.proxy.notes import origin
from spillage.proxy.notes import parse_verifier_key

KEY_DIR = "signing"
KEY_FILE = "ed25519.pem"
PUBLIC_FILE = "ed25519.pub.pem"
FINGERPRINT_PREFIX = "ed25519:"
VKEY_START = re.compile(r"[^\s+]+\+[0-9a-f]{8}\+")   # a C2SP note verifier key: name+keyid+base64
KEY_LIMIT = 64 << 10   # a PEM key is a few hundred bytes; a bigger file is not one
CERTIFICATE_PURPOSE = "spillage-session-key-v1"
CHECKPOINT_PURPOSE = "spillage-checkpoint-v1"
AUDIT_PURPOSE = "spillage-audit-v1"
#: What the issuer of a session key may state in its certificate: how the agent was isolated
#: (`sandbox`, `none`, ...), that it cosigns the log's final checkpoint once it has checked the log, and
#: what of the session folder besides the log it binds (`bound`: proxy/bound.py).
CLAIMS = ("isolation", "cosign", "bound")


class SigningKeyError(ValueError):
    """A key that cannot be read or used; names the file or the value."""


def b64(data: bytes) -> str:
    """Standard base64 of `data`."""
    return base64.b64encode(data).decode("ascii")


def unb64(text: object) -> bytes | None:
    """The bytes of a base64 string, or None when it is not one."""
    if not isinstance(text, str):
        return None
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def fingerprint(public_raw: bytes) -> str:
    """`ed25519:<SHA-256 hex of the raw 32-byte public key>`."""
    return FINGERPRINT_PREFIX + hashlib.sha256(public_raw).hexdigest()


def raw_public(key: Ed25519PrivateKey) -> bytes:
    """The raw 32-byte public key of `key`."""
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_file(home: Path) -> Path:
    """Where the long-term private key of a spillage home is kept."""
    return Path(home) / KEY_DIR / KEY_FILE


def load_or_create_key(home: Path) -> Ed25519PrivateKey:
    """The long-term key of `home`, made on first use (0600 in a 0700 folder, safe against concurrent
    runs). Its public half is written beside it as `ed25519.pub.pem` for others to pin. SigningKeyError
    names the file when the home, its folder or its key is not one."""
    folder = Path(home) / KEY_DIR
    for place in (Path(home), folder):
        if place.exists() and not place.is_dir():
            raise SigningKeyError(f"{place}: a file, not a folder; the spillage home (--home, $SPILLAGE_HOME) "
                                  f"is a folder, its key in {KEY_DIR}/{KEY_FILE}")
    try:
        Path(home).mkdir(parents=True, exist_ok=True, mode=0o700)
        folder.mkdir(exist_ok=True, mode=0o700)
        os.chmod(folder, 0o700)
    except OSError as exc:
        raise SigningKeyError(f"{exc.filename or folder}: cannot make the spillage home's key folder "
                              f"({exc.strerror or exc})") from None
    path = folder / KEY_FILE
    with open(folder / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            key = Ed25519PrivateKey.generate()
            pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
            tmp = folder / f".{KEY_FILE}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with open(fd, "wb") as f:
                f.write(pem)
                f.flush()
                os.fsync(f.fileno())
            tmp.replace(path)
            (folder / PUBLIC_FILE).write_bytes(public_pem(raw_public(key)))
    return read_private_key(path)


def read_private_key(path: Path) -> Ed25519PrivateKey:
    """The unencrypted Ed25519 private key in PEM at `path` (0600 from now on); SigningKeyError names the
    file and what it holds instead."""
    if path.exists() and not path.is_file():
        raise SigningKeyError(f"{path}: not a file; the signing key is a PEM file (move it away to make a new one)")
    try:
        os.chmod(path, 0o600)
        text = read_text(path, KEY_LIMIT, "PEM private key")
    except (OSError, DocumentError) as exc:
        raise SigningKeyError(str(exc) if isinstance(exc, DocumentError) else f"{path}: {exc.strerror or exc}") from None
    try:
        key = serialization.load_pem_private_key(text.encode("utf-8"), password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise SigningKeyError(f"{path}: not an unencrypted Ed25519 private key in PEM "
                              f"({' '.join(str(exc).split()).split('. ')[0]})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningKeyError(f"{path}: not an Ed25519 private key ({type(key).__name__.lstrip('_')})")
    return key


def public_pem(public_raw: bytes) -> bytes:
    """The PEM (SubjectPublicKeyInfo) of a raw Ed25519 public key."""
    return Ed25519PublicKey.from_public_bytes(public_raw).public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def pinned_fingerprint(spec: str) -> str:
    """The fingerprint `--key SPEC` pins: SPEC is a fingerprint (`ed25519:<hex>`), a base64 raw public
    key, a C2SP note verifier key (`spillage key` prints it), or a PEM file holding an Ed25519 public or
    private key. SigningKeyError says why it is none."""
    if spec.startswith(FINGERPRINT_PREFIX):
        digest = spec[len(FINGERPRINT_PREFIX):]
        if len(digest) == 64 and all(c in "0123456789abcdef" for c in digest):
            return spec
        raise SigningKeyError(f"--key {spec}: a fingerprint is 'ed25519:' and 64 lowercase hex digits")
    return fingerprint(pinned_public(spec))


def pinned_public(spec: str) -> bytes:
    """The raw public key `--key SPEC` names (see pinned_fingerprint; a bare fingerprint names none).
    SigningKeyError says why it is none."""
    if spec.startswith(FINGERPRINT_PREFIX):
        raise SigningKeyError(f"--key {spec}: a fingerprint cannot check a signature; give the public key "
                              "(the verifier key or PEM file `spillage key` prints)")
    raw = unb64(spec)
    if raw is not None and len(raw) == 32:
        return raw
    if VKEY_START.match(spec):
        try:
            return parse_verifier_key(spec)[1]
        except NoteError as exc:
            raise SigningKeyError(f"--key {exc}") from None
    path = Path(spec)
    if not path.is_file():
        raise SigningKeyError(f"--key {spec}: no such file, and not a fingerprint, a verifier key or a base64 "
                              "public key")
    data = path.read_bytes()
    for load in (serialization.load_pem_public_key,
                 lambda d: serialization.load_pem_private_key(d, password=None)):
        try:
            key = load(data)
        except (ValueError, TypeError):
            continue
        if isinstance(key, Ed25519PrivateKey):
            return raw_public(key)
        if isinstance(key, Ed25519PublicKey):
            return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    raise SigningKeyError(f"{path}: not an Ed25519 public or private key in PEM")


def _message(obj: dict) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def certificate_message(session: str, key: str, issued: str, claims: dict | None = None) -> bytes:
    """What the long-term key signs to certify session key `key` (base64) for `session`, with what the
    issuer says of the session besides (`claims`: CLAIMS, in logs written since they exist)."""
    return _message({"purpose": CERTIFICATE_PURPOSE, "session": session, "key": key, "issued": issued,
                     **(claims or {})})


def checkpoint_message(session: str, tree_size: int, root: str, ts: str) -> bytes:
    """What a checkpoint signs: the session, the tree size, the root (hex) and the time."""
    return _message({"purpose": CHECKPOINT_PURPOSE, "session": session, "tree_size": tree_size,
                     "root": root, "ts": ts})


def audit_message(audit: dict) -> bytes:
    """What the long-term key of the home that ran an audit signs: the audit (audit.json) without its
    `signature`, which names the log's head, the scenario's and the catalog's SHA-256 and the judge."""
    return _message({"purpose": AUDIT_PURPOSE, "audit": {k: v for k, v in audit.items() if k != "signature"}})


def sign_audit(audit: dict, key: Ed25519PrivateKey) -> dict:
    """`audit` with its `signature`: {key: the signer's public key, base64; value: the signature}."""
    return {**audit, "signature": {"key": b64(raw_public(key)), "value": b64(key.sign(audit_message(audit)))}}


def audit_signer(audit: dict) -> str | None:
    """The fingerprint of the key whose signature `audit` carries, None when it carries no valid one."""
    signature = audit.get("signature")
    if not isinstance(signature, dict) or not signature_ok(signature.get("key"), signature.get("value"),
                                                           audit_message(audit)):
        return None
    return fingerprint(unb64(signature["key"]) or b"")


def signature_ok(public_b64: object, signature_b64: object, message: bytes) -> bool:
    """True when `signature_b64` is a valid Ed25519 signature of `message` by `public_b64`."""
    public, signature = unb64(public_b64), unb64(signature_b64)
    if public is None or signature is None or len(public) != 32 or len(signature) != 64:
        return False
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(signature, message)
    except InvalidSignature:
        return False
    return True


class Signer:
    """A private key that signs checkpoints; `key` is its public half in base64, `name` the key name its
    C2SP note signatures carry (a long-term key's own, unless given)."""

    def __init__(self, private: Ed25519PrivateKey, name: str | None = None) -> None:
        self.private = private
        self.key = b64(raw_public(private))
        self.name = name or long_term_name(raw_public(private))

    def sign(self, message: bytes) -> str:
        """The base64 signature of `message`."""
        return b64(self.private.sign(message))

    def sign_note(self, text: str) -> Signature:
        """This key's signature of a note's text."""
        public = raw_public(self.private)
        return Signature(self.name, key_id(self.name, public), self.private.sign(text.encode("utf-8")))


def note_signed(note: Note, name: str, public_b64: object) -> bool | None:
    """Whether `note` carries a valid signature of the key `name`/`public_b64`: None when it carries none
    of that key, False when that key's signature does not verify."""
    public = unb64(public_b64)
    if public is None or len(public) != 32:
        return False
    found = note.by(name, public)
    if found is None:
        return None
    return signature_ok(public_b64, b64(found.signature), note.text.encode("utf-8"))


@dataclass(frozen=True)
class SessionKey:
    """A session's own key and the long-term key's certificate for it: the `signer` record's fields."""

    session: str
    private: Ed25519PrivateKey
    issuer: str          # the long-term public key, base64
    issued: str          # when the certificate was made (UTC)
    certificate: str     # the long-term key's signature of certificate_message(...)
    claims: dict | None = None   # what the certificate states besides (CLAIMS)

    @classmethod
    def issue(cls, issuer: Ed25519PrivateKey, session: str, issued: str, **claims) -> SessionKey:
        """A fresh key for `session`, certified by `issuer` at `issued`, stating `claims` (CLAIMS)."""
        unknown = set(claims) - set(CLAIMS)
        if unknown:
            raise ValueError(f"unknown claims: {', '.join(sorted(unknown))}")
        private = Ed25519PrivateKey.generate()
        key = b64(raw_public(private))
        certificate = b64(issuer.sign(certificate_message(session, key, issued, claims)))
        return cls(session, private, b64(raw_public(issuer)), issued, certificate, claims or None)

    @property
    def key(self) -> str:
        """The session's public key, base64."""
        return b64(raw_public(self.private))

    def signer(self) -> Signer:
        """A Signer with the session key, whose note signatures carry the session's origin as key name."""
        return Signer(self.private, origin(self.session))

    def record_fields(self) -> dict:
        """The fields of the `signer` record that opens a signed log."""
        return {"session": self.session, "key": self.key, "issuer": self.issuer,
                "issued": self.issued, "certificate": self.certificate, **(self.claims or {})}

    def to_json(self) -> str:
        """The session key with its certificate, for the handoff to the proxy (secret: a pipe only)."""
        raw = self.private.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                         serialization.NoEncryption())
        return json.dumps({**self.record_fields(), "private": b64(raw)})

    @classmethod
    def from_json(cls, text: str) -> SessionKey:
        """Read what `to_json` wrote; SigningKeyError when it is not that."""
        try:
            obj = json.loads(text)
            private = Ed25519PrivateKey.from_private_bytes(unb64(obj["private"]) or b"")
            claims = {k: obj[k] for k in CLAIMS if k in obj}
            made = cls(obj["session"], private, obj["issuer"], obj["issued"], obj["certificate"], claims or None)
        except (ValueError, KeyError, TypeError) as exc:
            raise SigningKeyError(f"not a session key handoff: {exc!r}") from None
        if made.key != obj.get("key"):
            raise SigningKeyError("session key handoff: the public key does not match the private key")
        return made


def certificate_ok(fields: dict) -> bool:
    """True when a `signer` record's certificate is the issuer's valid signature for its session key and
    the claims it states."""
    claims = {k: fields[k] for k in CLAIMS if k in fields}
    message = certificate_message(str(fields.get("session")), str(fields.get("key")), str(fields.get("issued")),
                                  claims)
    return signature_ok(fields.get("issuer"), fields.get("certificate"), message)
