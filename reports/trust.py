"""Whether a report may count a session's audit: its log verified here (not as audit.json says), signed
by a key the report trusts, and its audit.json signed by a trusted key for this very log, scenario copy
and catalog (docs/EVIDENCE.md, "What a report counts")."""

from __future__ import annotations

from pathlib import Path

from spillage.proxy.bound import bound_catalog
from spillage.proxy.layout import REPORT_NAME
from spillage.proxy.layout import SCENARIO_COPY
from spillage.proxy.layout import file_sha256
from spillage.proxy.signing import audit_signer
from spillage.proxy.verify import VerifyResult
from spillage.proxy.verify import signed_issuer


def trusted_keys(folder: Path, check: VerifyResult, pins: frozenset[str] | None) -> frozenset[str] | None:
    """The keys whose audits count: those pinned (`--keys`), else the key that certified the session (for
    a log that does not verify, the one its signer record names); None for an unsigned log without pins
    (counted only as unverified: any valid signature shows its audit.json was not changed since)."""
    if pins:
        return pins
    issuer = check.signed.issuer if check.signed else signed_issuer(folder)
    return frozenset({issuer}) if issuer else None


def log_problem(check: VerifyResult, pins: frozenset[str] | None) -> str | None:
    """Why a log that verifies is not counted as verified: unsigned, or signed by a key not pinned."""
    if check.ok and check.signed is None:
        return "unsigned: no signature vouches for its log (--include-unverified counts it, as unverified)"
    if check.ok and pins and check.signed.issuer not in pins:
        return f"signed by {check.signed.issuer}, which is not one of the --keys"
    return None


def audit_problem(folder: Path, audit: dict, check: VerifyResult, pins: frozenset[str] | None) -> str | None:
    """Why `audit` (the session's audit.json) cannot be counted for the log `check` verified (None when
    it can): unsigned, edited after it was signed, signed by an untrusted key, or the audit of another
    log head, scenario copy or catalog than the session's."""
    if "signature" not in audit:
        return f"{REPORT_NAME} is not signed: `spillage audit {folder}` audits it again and signs it"
    signer = audit_signer(audit)
    if signer is None:
        return f"{REPORT_NAME} carries no valid signature: it was changed after it was signed"
    trusted = trusted_keys(folder, check, pins)
    if trusted is not None and signer not in trusted:
        return (f"{REPORT_NAME} is signed by {signer}, not by the session's issuer or one of the --keys "
                "(--keys names the keys whose audits count)")
    if check.ok and audit["capture"]["head"] != check.head:
        return f"{REPORT_NAME} is the audit of a log with head {audit['capture']['head']}, not of this one ({check.head})"
    copy = folder / SCENARIO_COPY
    if copy.is_file() and audit.get("scenario_sha256") != file_sha256(copy):
        return f"{REPORT_NAME} audited another scenario than the session's {SCENARIO_COPY}"
    bound = check.signed.bound if check.signed else None
    if bound is not None and (audit.get("catalog") or {}).get("sha256") != bound_catalog(bound):
        return f"{REPORT_NAME} read another catalog than the one the session's certificate binds"
    return None
