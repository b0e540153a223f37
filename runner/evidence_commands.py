"""`spillage seal`, `spillage prove`, `spillage verify-proof` and `spillage key`: the evidence commands
beside `verify` (docs/EVIDENCE.md)."""

import sys
from pathlib import Path

from spillage.proxy.documents import atomic_file
from spillage.runner.console import BAD_INPUT
from spillage.runner.console import DAMAGED
from spillage.runner.console import fail
from spillage.runner.console import utf8_text

KEY_HELP = ("pin the long-term key that must have certified the session: a fingerprint (ed25519:…), a "
            "base64 public key, or a PEM file (`spillage key` prints this machine's)")


def cmd_seal(args) -> int:
    from spillage.proxy.layout import LOG_NAME
    from spillage.proxy.layout import read_meta
    from spillage.proxy.layout import seal_permissions
    from spillage.proxy.layout import write_meta
    from spillage.proxy.seal import SealError
    from spillage.proxy.seal import seal_crashed
    from spillage.proxy.signing import Signer
    from spillage.proxy.signing import SigningKeyError
    from spillage.proxy.signing import load_or_create_key
    from spillage.proxy.verify import verify
    from spillage.runner.console import spillage_home

    session = Path(args.session)
    if not (session / LOG_NAME).is_file():
        return fail(f"{session}: no {LOG_NAME} here; is this a session folder?", 2)
    try:
        signer = Signer(load_or_create_key(spillage_home(args)))
    except SigningKeyError as e:
        return fail(str(e), BAD_INPUT)
    try:
        record = seal_crashed(session, signer, "spillage seal", args.reason)
        meta = read_meta(session)
    except (SealError, ValueError) as e:
        return fail(str(e), DAMAGED)
    result = verify(session)
    if meta is not None:
        meta.update({"evidence": "sealed after crash", "capture_damage": result.summary(),
                     "capture": {"records": result.count, "head": result.head}})
        write_meta(session, meta)
    seal_permissions(session)
    print(f"sealed after crash at seq {record['seq']}, {result.count} records; `spillage verify` now reports "
          f"the log as {result.damage}: {result.message}")
    return 0


def cmd_prove(args) -> int:
    from spillage.proxy.layout import LOG_NAME
    from spillage.proxy.live import live_notice
    from spillage.proxy.proofs import ProofError
    from spillage.proxy.proofs import ProofRequestError
    from spillage.proxy.proofs import proof_json
    from spillage.proxy.proofs import prove_consistency
    from spillage.proxy.proofs import prove_inclusion
    from spillage.proxy.proofs import prove_tlog
    from spillage.proxy.signing import SigningKeyError

    session = Path(args.session)
    if not (session / LOG_NAME).is_file():
        return fail(f"{session}: no {LOG_NAME} here; is this a session folder?", 2)
    if args.consistency and args.format == "tlog-proof":
        return fail("--format tlog-proof holds an inclusion proof (--seq N); a consistency proof is spillage-proof", 2)
    try:
        if args.consistency:
            text, what = proof_json(prove_consistency(session, *args.consistency, key=args.key)), "consistency proof"
        elif args.format == "tlog-proof":
            text, what = prove_tlog(session, args.seq, key=args.key), "inclusion proof (c2sp.org/tlog-proof)"
        else:
            text, what = proof_json(prove_inclusion(session, args.seq, key=args.key)), "inclusion proof"
    except ProofError as e:
        return fail(str(e), BAD_INPUT if isinstance(e, ProofRequestError) else DAMAGED)
    except SigningKeyError as e:
        return fail(str(e), BAD_INPUT)
    notice = live_notice(session, f"the {what}")
    if notice:   # a proof holds its record as signed: nothing in it can be redacted
        print(f"spillage: {notice}; a proof holds its record as captured", file=sys.stderr)
    if args.out in (None, "-"):
        sys.stdout.write(text)
    else:
        out = Path(args.out)
        if not out.parent.is_dir():
            return fail(f"{out.parent}: no such folder", 2)
        with atomic_file(out) as f:
            f.write(text)
        print(f"spillage: wrote the {what} to {out}", file=sys.stderr)
    return 0


def cmd_verify_proof(args) -> int:
    from spillage.proxy.proofs import ProofError
    from spillage.proxy.proofs import read_proof
    from spillage.proxy.signing import SigningKeyError

    try:
        ok, verdict = read_proof(args.proof, args.key)
    except (ProofError, SigningKeyError) as e:
        return fail(str(e), BAD_INPUT)
    print(f"{verdict.split(' ', 1)[0]} {args.proof}: {verdict.split(' ', 1)[1]}")
    return 0 if ok else 1


def cmd_key(args) -> int:
    from spillage.proxy.notes import long_term_name
    from spillage.proxy.notes import verifier_key
    from spillage.proxy.signing import KEY_DIR
    from spillage.proxy.signing import PUBLIC_FILE
    from spillage.proxy.signing import fingerprint
    from spillage.proxy.signing import load_or_create_key
    from spillage.proxy.signing import public_pem
    from spillage.proxy.signing import raw_public
    from spillage.runner.console import spillage_home

    home = spillage_home(args)
    public = raw_public(load_or_create_key(home))
    print(fingerprint(public))
    print(verifier_key(long_term_name(public), public))
    print(f"spillage: public key in {home / KEY_DIR / PUBLIC_FILE}, its fingerprint and its C2SP note verifier key "
          "above; pin it with --key", file=sys.stderr)
    sys.stdout.write(public_pem(public).decode("ascii"))
    return 0


def add_commands(sub) -> None:
    """Add `seal`, `prove`, `verify-proof` and `key` to the `spillage` parser's subparsers `sub`."""
    seal = sub.add_parser(
        "seal", help="seal a log whose proxy died before it could",
        description="Seal the capture log of a session whose proxy crashed: a torn last line is moved to "
                    "capture.torn, and a crash_seal record (why, by whom, how far the proxy's own signatures "
                    "reach) is signed with this machine's key. `spillage verify` then reports the log as "
                    "'truncated, sealed after crash', never as clean.")
    seal.add_argument("session", type=Path, help="session folder")
    seal.add_argument("--reason", type=utf8_text, default="sealed by hand after the proxy crashed",
                      help="why, for the record (default: sealed by hand after the proxy crashed)")
    seal.set_defaults(func=cmd_seal)

    prove = sub.add_parser(
        "prove", help="an inclusion proof for one record, or a consistency proof between two signed heads",
        description="Write a proof that anyone can check with `spillage verify-proof` and nothing else: "
                    "--seq N proves that record N is in the session's signed log (the record, its audit path "
                    "and the final signed head); --consistency A B proves that the signed head of tree size "
                    "B extends the one of size A.")
    prove.add_argument("session", type=Path, help="session folder")
    what = prove.add_mutually_exclusive_group(required=True)
    what.add_argument("--seq", type=int, help="the record to prove")
    what.add_argument("--consistency", type=int, nargs=2, metavar=("A", "B"),
                      help="tree sizes of two signed checkpoints of the log")
    prove.add_argument("--format", choices=["spillage-proof", "tlog-proof"], default="spillage-proof",
                       help="spillage-proof (JSON, default) or tlog-proof (c2sp.org/tlog-proof, for --seq: any "
                            "tlog-proof verifier checks it with the issuer's key; docs/EVIDENCE.md)")
    prove.add_argument("--out", help="the proof file (default: stdout)")
    prove.add_argument("--key", metavar="KEY", help=KEY_HELP)
    prove.set_defaults(func=cmd_prove)

    check = sub.add_parser("verify-proof", help="check a proof file written by `spillage prove`",
                           description="Check a proof with nothing else at hand (a tlog-proof with the issuer's "
                                       "public key, --key): exit 0 when it holds, 1 when it does not, 2 when the "
                                       "file is not a proof.")
    check.add_argument("proof", type=Path, help="the proof file")
    check.add_argument("--key", metavar="KEY", help=KEY_HELP)
    check.set_defaults(func=cmd_verify_proof)

    key = sub.add_parser("key", help="print this machine's signing key (its fingerprint and public PEM)",
                         description="Print the fingerprint and the public key of the long-term signing key in "
                                     "the spillage home (made on first use), for others to pin with --key.")
    key.set_defaults(func=cmd_key)
