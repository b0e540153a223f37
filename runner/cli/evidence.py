"""`spillage verify`, `seal`, `prove`, `verify-proof` and `key`: the evidence commands (docs/EVIDENCE.md).
They print the evidence core's verdicts and give their exit statuses; the core itself prints nothing."""

import sys
from pathlib import Path

from spillage.proxy.documents import atomic_file
from spillage.proxy.settings import BAD_INPUT
from spillage.proxy.settings import DAMAGED
from spillage.proxy.settings import OK
from spillage.runner.cli.console import spillage_home
from spillage.runner.cli.types import utf8_text
from spillage.runner.cli.verbs import KEY
from spillage.runner.cli.verbs import Refusal
from spillage.runner.cli.verbs import arg
from spillage.runner.cli.verbs import one_of
from spillage.runner.cli.verbs import require_sessions
from spillage.runner.cli.verbs import session_arg
from spillage.runner.cli.verbs import verb


@verb("verify", help="check a session's capture log: chain, signed checkpoints, seal",
      args=[session_arg("session folder or capture.jsonl"), KEY])
def cmd_verify(args) -> int:
    """Check a session's capture log (docs/CAPTURE_FORMAT.md) and what its signatures prove (docs/EVIDENCE.md). Exit
    0 when clean, 1 when damaged, tampered or sealed after a crash, 2 for bad input."""
    from spillage.proxy.layout import LOG_NAME
    from spillage.proxy.layout import capture_path
    from spillage.proxy.verify import verify

    log = capture_path(args.session)
    if not args.session.exists():
        raise Refusal(f"{args.session}: no such file or folder")
    if not log.is_file():
        raise Refusal(f"{args.session}: no {LOG_NAME} in this folder")
    try:
        result = verify(log, args.key)   # a bad --key is a SigningKeyError: bad input, at the boundary
    except OSError as e:
        raise Refusal(f"{log}: cannot read: {e.strerror or e}") from None
    print(result.summary())
    return OK if result.ok else DAMAGED


@verb("seal", help="seal a log whose proxy died before it could",
      args=[session_arg(), arg("--reason", type=utf8_text, default="sealed by hand after the proxy crashed",
                           help="why, for the record (default: sealed by hand after the proxy crashed)")])
def cmd_seal(args) -> int:
    """Seal the capture log of a session whose proxy crashed: a torn last line is moved to capture.torn, and a
    crash_seal record (why, by whom, how far the proxy's own signatures reach) is signed with this machine's
    key. `spillage verify` then reports the log as 'truncated, sealed after crash', never as clean."""
    from spillage.proxy.layout import read_meta
    from spillage.proxy.layout import seal_permissions
    from spillage.proxy.layout import write_meta
    from spillage.proxy.seal import SealError
    from spillage.proxy.seal import seal_crashed
    from spillage.proxy.signing import Signer
    from spillage.proxy.signing import load_or_create_key
    from spillage.proxy.verify import verify

    session = args.session
    require_sessions(session)
    signer = Signer(load_or_create_key(spillage_home(args)))   # a bad key is bad input, at the boundary
    try:
        record = seal_crashed(session, signer, "spillage seal", args.reason)
        meta = read_meta(session)
    except (SealError, ValueError) as e:
        raise Refusal(str(e), DAMAGED) from None
    result = verify(session)
    if meta is not None:
        meta.update({"evidence": "sealed after crash", "capture_damage": result.summary(),
                     "capture": {"records": result.count, "head": result.head}})
        write_meta(session, meta)
    seal_permissions(session)
    print(f"sealed after crash at seq {record['seq']}, {result.count} records; `spillage verify` now reports "
          f"the log as {result.damage}: {result.message}")
    return 0


@verb("prove", help="an inclusion proof for one record, or a consistency proof between two signed heads",
      args=[
          session_arg(),
          one_of(arg("--seq", type=int, help="the record to prove"),
                 arg("--consistency", type=int, nargs=2, metavar=("A", "B"),
                     help="tree sizes of two signed checkpoints of the log")),
          arg("--format", choices=["spillage-proof", "tlog-proof"], default="spillage-proof",
              help="spillage-proof (JSON, default) or tlog-proof (c2sp.org/tlog-proof, for --seq: any "
                   "tlog-proof verifier checks it with the issuer's key; docs/EVIDENCE.md)"),
          arg("--out", help="the proof file (default: stdout)"),
          KEY,
      ])
def cmd_prove(args) -> int:
    """Write a proof that anyone can check with `spillage verify-proof` and nothing else: --seq N proves that record
    N is in the session's signed log (the record, its audit path and the final signed head); --consistency A B
    proves that the signed head of tree size B extends the one of size A."""
    from spillage.proxy.live import live_notice
    from spillage.proxy.proofs import ProofError
    from spillage.proxy.proofs import ProofRequestError
    from spillage.proxy.proofs import proof_json
    from spillage.proxy.proofs import prove_consistency
    from spillage.proxy.proofs import prove_inclusion
    from spillage.proxy.proofs import prove_tlog

    session = args.session
    require_sessions(session)
    if args.consistency and args.format == "tlog-proof":
        raise Refusal("--format tlog-proof holds an inclusion proof (--seq N); a consistency proof is spillage-proof")
    try:
        if args.consistency:
            text, what = proof_json(prove_consistency(session, *args.consistency, key=args.key)), "consistency proof"
        elif args.format == "tlog-proof":
            text, what = prove_tlog(session, args.seq, key=args.key), "inclusion proof (c2sp.org/tlog-proof)"
        else:
            text, what = proof_json(prove_inclusion(session, args.seq, key=args.key)), "inclusion proof"
    except ProofError as e:   # a bad --key is a SigningKeyError: bad input, at the boundary
        raise Refusal(str(e), BAD_INPUT if isinstance(e, ProofRequestError) else DAMAGED) from None
    notice = live_notice(session, f"the {what}")
    if notice:   # a proof holds its record as signed: nothing in it can be redacted
        print(f"spillage: {notice}; a proof holds its record as captured", file=sys.stderr)
    if args.out in (None, "-"):
        sys.stdout.write(text)
    else:
        out = Path(args.out)
        if not out.parent.is_dir():
            raise Refusal(f"{out.parent}: no such folder")
        with atomic_file(out) as f:
            f.write(text)
        print(f"spillage: wrote the {what} to {out}", file=sys.stderr)
    return 0


@verb("verify-proof", help="check a proof file written by `spillage prove`",
      args=[arg("proof", type=Path, help="the proof file"), KEY])
def cmd_verify_proof(args) -> int:
    """Check a proof with nothing else at hand (a tlog-proof with the issuer's public key, --key): exit 0 when it
    holds, 1 when it does not, 2 when the file is not a proof."""
    from spillage.proxy.proofs import ProofError
    from spillage.proxy.proofs import read_proof

    try:
        ok, verdict = read_proof(args.proof, args.key)
    except ProofError as e:
        raise Refusal(str(e)) from None
    print(f"{verdict.split(' ', 1)[0]} {args.proof}: {verdict.split(' ', 1)[1]}")
    return OK if ok else DAMAGED


@verb("key", help="print this machine's signing key (its fingerprint and public PEM)")
def cmd_key(args) -> int:
    """Print the fingerprint and the public key of the long-term signing key in the spillage home (made on first
    use), for others to pin with --key."""
    from spillage.proxy.notes import long_term_name
    from spillage.proxy.notes import verifier_key
    from spillage.proxy.signing import KEY_DIR
    from spillage.proxy.signing import PUBLIC_FILE
    from spillage.proxy.signing import fingerprint
    from spillage.proxy.signing import load_or_create_key
    from spillage.proxy.signing import public_pem
    from spillage.proxy.signing import raw_public

    home = spillage_home(args)
    public = raw_public(load_or_create_key(home))
    print(fingerprint(public))
    print(verifier_key(long_term_name(public), public))
    print(f"spillage: public key in {home / KEY_DIR / PUBLIC_FILE}, its fingerprint and its C2SP note verifier key "
          "above; pin it with --key", file=sys.stderr)
    sys.stdout.write(public_pem(public).decode("ascii"))
    return 0

