"""The inclusion proofs the forensic page offers for download: one spillage-proof file per proving
record (`spillage prove SESSION --seq N`, checked by `spillage verify-proof`), as a data: URL."""

import base64
from dataclasses import dataclass

from spillage.audit.open_session import OpenSession
from spillage.proxy.proofs import ProofError
from spillage.proxy.proofs import inclusions
from spillage.proxy.proofs import proof_json
from spillage.proxy.proofs import signed_log

MAX_PROOF_BYTES = 256 * 1024  # a larger proof (a big inline body) is left to `spillage prove`


@dataclass(frozen=True)
class ProofLinks:
    """seq → the proof's data: URL; `why` says why a record has none (unsigned log, failed check)."""

    urls: dict[int, str]
    why: str = ""

    def url(self, seq: int) -> str | None:
        return self.urls.get(seq)


def proof_links(session: OpenSession, seqs: set[int]) -> ProofLinks:
    """Proofs of the records `seqs`, cut from the opened session's verification and lines."""
    try:
        proofs = inclusions(signed_log(session.folder, session.check, session.lines(), seqs), seqs)
    except ProofError as e:
        return ProofLinks({}, str(e))
    urls, big = {}, []
    for seq, proof in proofs.items():
        data = proof_json(proof).encode()
        if len(data) > MAX_PROOF_BYTES:
            big.append(seq)
        else:
            urls[seq] = "data:application/json;base64," + base64.b64encode(data).decode("ascii")
    return ProofLinks(urls, f"over {MAX_PROOF_BYTES // 1024} KB: `spillage prove` writes it" if big else "")
