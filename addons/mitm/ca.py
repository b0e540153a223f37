"""The proxy's certificate authority: kept in a project folder, trusted by Chromium through its SPKI pin."""

import base64
import fcntl
import hashlib
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

CONF_BASENAME = "mitmproxy"   # mitmproxy.options.CONF_BASENAME: the names mitmproxy looks for in its confdir
DEFAULT_CONFDIR = ".mitmproxy"  # mitmproxy's default confdir, under $HOME: in the CA folder, a link to itself


class CertAuthorityError(ValueError):
    """The CA folder holds something the proxy cannot be started with."""


@dataclass(frozen=True)
class CertAuthority:
    """Where the CA lives and how clients are told to trust it."""

    confdir: Path      # mitmproxy's confdir: holds the CA key and certificate
    cert_file: Path    # the CA certificate alone (PEM), for SSL_CERT_FILE and friends

    @property
    def home(self) -> Path:
        """A $HOME under which mitmproxy's default confdir (`~/.mitmproxy`) is this CA's folder (see
        addons/mitm/launcher.py for why the proxy is told its CA this way)."""
        return self.confdir

    @cached_property
    def spki_pin(self) -> str:
        """Base64 SHA-256 of the CA's SubjectPublicKeyInfo, for Chromium (read when first asked for: the
        proxy can start before the X.509 parser is imported)."""
        return spki_pin(self.cert_file.read_bytes())


def spki_pin(cert_pem: bytes) -> str:
    """Base64 SHA-256 of the certificate's public key, as `--ignore-certificate-errors-spki-list` wants."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    cert = x509.load_pem_x509_certificate(cert_pem)
    spki = cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(hashlib.sha256(spki).digest()).decode("ascii")


def ensure_ca(confdir: Path) -> CertAuthority:
    """Create the CA in `confdir` unless it exists (safe against concurrent runs), and describe it.

    The folder is 0700 and the files holding the CA key 0600, also for a CA made by an older version;
    agents get a copy of the certificate alone. `.mitmproxy` in it links to itself (CertAuthority.home)."""
    confdir = confdir.resolve()
    try:
        confdir.parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # the spillage home
        confdir.mkdir(exist_ok=True, mode=0o700)
        os.chmod(confdir, 0o700)
    except OSError as exc:
        raise CertAuthorityError(f"{exc.filename or confdir}: cannot be the spillage home's CA folder "
                                 f"({exc.strerror or exc}); give --home a folder") from None
    cert_file = confdir / f"{CONF_BASENAME}-ca-cert.pem"
    with open(confdir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (confdir / f"{CONF_BASENAME}-ca.pem").exists():
            from mitmproxy.certs import CertStore   # only to make one: mitmproxy takes a while to import
            from mitmproxy.options import KEY_SIZE

            CertStore.create_store(
                confdir, CONF_BASENAME, KEY_SIZE,
                organization="Spillage", cn="Spillage local capture CA",
            )
        for secret in confdir.glob(f"{CONF_BASENAME}-ca.*"):
            os.chmod(secret, 0o600)
        link_home(confdir)
    return CertAuthority(confdir, cert_file)


def link_home(confdir: Path) -> None:
    """Make `confdir/.mitmproxy` a link to `confdir` itself, replacing a link that points elsewhere (the
    proxy would take its CA and config.yaml from there). Anything else by that name is refused."""
    link = confdir / DEFAULT_CONFDIR
    if link.is_symlink() and os.readlink(link) == ".":
        return
    if link.exists() and not link.is_symlink():
        raise CertAuthorityError(f"{link}: expected a link to its own folder (the proxy's CA), found "
                                 "a file or folder; move it away and run again")
    fresh = confdir / f"{DEFAULT_CONFDIR}.{os.getpid()}"
    fresh.unlink(missing_ok=True)
    fresh.symlink_to(".")
    os.replace(fresh, link)
